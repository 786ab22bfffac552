// ServerSecurity: the coordinator's gRPC transport security and call rules (Auth), from its flags.
//
// None of --tls-cert, --tls-key, --tls-ca, --token-file: plaintext, every call allowed (local
// development; main prints kPlaintextWarning). All four: TLS with the server's certificate and
// key; client certificates are requested (not required, as pipectl has none) and, when sent,
// must verify against --tls-ca, which is how WorkerService identifies workers; the token guards
// the mutating JobService calls (auth.h has the rules). Some but not all: INVALID_ARGUMENT
// naming what is missing, so a deployment cannot end up half secured.
#ifndef PIPECOORD_COORDINATOR_SERVER_SECURITY_H_
#define PIPECOORD_COORDINATOR_SERVER_SECURITY_H_

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "coordinator/auth.h"

namespace pipecoord::coordinator {

inline constexpr char kPlaintextWarning[] =
    "WARNING: serving gRPC in plaintext without authentication: for local development only";

struct ServerSecurityFlags {
  std::string tls_cert, tls_key, tls_ca;  // PEM files
  std::string token_file;                 // the bearer token (never on the command line)
};

struct ServerSecurity {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  Auth auth;
  bool plaintext() const { return auth.open(); }
};

Result<ServerSecurity> ServerSecurityFromFlags(const ServerSecurityFlags& flags);

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_SERVER_SECURITY_H_
