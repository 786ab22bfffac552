// Auth: who may make which call on the coordinator's gRPC port. The rules live here, without
// gRPC types; the service handlers pass in what a call presented (CallCredentials, filled by
// call_credentials.h) and map the Status to the gRPC code.
//
// Open (plaintext, local development: no --token-file and no TLS flags): every call is allowed.
// Secured (--tls-cert, --tls-key, --tls-ca and --token-file):
//   JobService SubmitJob, CancelJob (the mutating calls): metadata "authorization: Bearer TOKEN"
//     with the coordinator's token, compared in constant time; missing or wrong: UNAUTHENTICATED.
//   JobService GetJob, ListJobs, WatchJob, ListWorkers, GetTrace (read-only): no token, as the
//     read-only HTTP dashboard shows the same; still only over TLS.
//   WorkerService (every call): a client certificate verified against --tls-ca whose identity,
//     its URI subject alternative name "urn:pipecoord:worker:ID", is the worker id ID. No
//     certificate: UNAUTHENTICATED. A certificate with no such name or several: PERMISSION_DENIED.
//     Any worker id in a request (Register, Heartbeat, Commands, ReportResult, Telemetry,
//     Rendezvous's metadata) that is not the certificate's: PERMISSION_DENIED. Register takes
//     its id from the certificate, never from the coordinator's counter.
#ifndef PIPECOORD_COORDINATOR_AUTH_H_
#define PIPECOORD_COORDINATOR_AUTH_H_

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace pipecoord::coordinator {

// The URI SAN a worker certificate carries: kWorkerUriPrefix + worker id.
inline constexpr char kWorkerUriPrefix[] = "urn:pipecoord:worker:";

// What one call presented.
struct CallCredentials {
  std::vector<std::string> authorization;     // values of the "authorization" metadata key
  bool client_certificate = false;            // a client certificate verified against --tls-ca
  std::vector<std::string> certificate_uris;  // that certificate's URI subject alternative names
};

class Auth {
 public:
  // Every call allowed (plaintext development mode).
  static Auth Open();
  // Mutating JobService calls need `token` (already checked by CheckToken, secret_files.h);
  // WorkerService calls need a worker certificate.
  static Auth Secured(const std::string& token);

  bool open() const { return !digest_.has_value(); }

  // SubmitJob and CancelJob: OK, or UNAUTHENTICATED naming `method` and what was wrong (never
  // echoing what was sent).
  Status CheckMutatingJobCall(const CallCredentials& call, const std::string& method) const;

  // The worker id the call's certificate names. Open: "" (nothing is bound).
  Result<std::string> WorkerIdentity(const CallCredentials& call) const;

  // OK when the caller may act as `worker_id` (always when open).
  Status CheckWorker(const CallCredentials& call, const std::string& worker_id) const;

  // The id Register uses: open, `requested` as is (empty: the coordinator picks one); secured, the
  // certificate's identity, PERMISSION_DENIED when `requested` is another.
  Result<std::string> RegisterAs(const CallCredentials& call, const std::string& requested) const;

 private:
  std::optional<std::array<unsigned char, 32>> digest_;  // SHA-256 of the token
};

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_AUTH_H_
