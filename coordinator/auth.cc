#include "coordinator/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cctype>

namespace pipecoord::coordinator {
namespace {

std::array<unsigned char, 32> Sha256(const std::string& s) {
  std::array<unsigned char, 32> out{};
  unsigned int n = 0;
  EVP_Digest(s.data(), s.size(), out.data(), &n, EVP_sha256(), nullptr);
  return out;
}

bool IEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

}  // namespace

Auth Auth::Open() { return Auth(); }

Auth Auth::Secured(const std::string& token) {
  Auth a;
  a.digest_ = Sha256(token);
  return a;
}

Status Auth::CheckMutatingJobCall(const CallCredentials& call, const std::string& method) const {
  if (open()) return Status::Ok();
  const std::string how = " (metadata \"authorization: Bearer TOKEN\": pipectl --token or PIPECOORD_TOKEN)";
  if (call.authorization.empty()) return Unauthenticated(method + ": a bearer token is required" + how);
  if (call.authorization.size() > 1) return Unauthenticated(method + ": one authorization header, got " +
                                                            std::to_string(call.authorization.size()));
  const std::string& header = call.authorization[0];
  const size_t space = header.find(' ');
  if (space == std::string::npos || !IEquals(header.substr(0, space), "Bearer")) {
    return Unauthenticated(method + ": the authorization header must be \"Bearer TOKEN\"" + how);
  }
  const size_t start = header.find_first_not_of(' ', space);
  const std::string token = start == std::string::npos ? "" : header.substr(start);
  // Digests of equal length compared in constant time: neither the token's contents nor its
  // length leak through the time a refusal takes.
  const std::array<unsigned char, 32> presented = Sha256(token);
  if (CRYPTO_memcmp(presented.data(), digest_->data(), presented.size()) != 0) {
    return Unauthenticated(method + ": the bearer token is wrong");
  }
  return Status::Ok();
}

Result<std::string> Auth::WorkerIdentity(const CallCredentials& call) const {
  if (open()) return std::string();
  if (!call.client_certificate) {
    return Unauthenticated("WorkerService: a client certificate signed by the coordinator's --tls-ca is required "
                           "(worker --tls-cert/--tls-key)");
  }
  std::string id;
  int found = 0;
  for (const std::string& uri : call.certificate_uris) {
    if (uri.rfind(kWorkerUriPrefix, 0) != 0) continue;
    const std::string candidate = uri.substr(sizeof kWorkerUriPrefix - 1);
    if (found > 0 && candidate == id) continue;
    id = candidate;
    ++found;
  }
  if (found == 0 || id.empty()) {
    return PermissionDenied(std::string("WorkerService: the client certificate names no worker (a URI SAN ") +
                            kWorkerUriPrefix + "ID)");
  }
  if (found > 1) {
    return PermissionDenied(std::string("WorkerService: the client certificate names ") + std::to_string(found) +
                            " workers (URI SANs " + kWorkerUriPrefix + "ID); it must name one");
  }
  if (id.size() > 128) return PermissionDenied("WorkerService: the certificate's worker id is over 128 characters");
  return id;
}

Status Auth::CheckWorker(const CallCredentials& call, const std::string& worker_id) const {
  if (open()) return Status::Ok();
  auto id = WorkerIdentity(call);
  if (!id.ok()) return id.status();
  if (worker_id != *id) {
    return PermissionDenied("worker_id \"" + worker_id + "\": this client certificate is for worker \"" + *id + "\"");
  }
  return Status::Ok();
}

Result<std::string> Auth::RegisterAs(const CallCredentials& call, const std::string& requested) const {
  if (open()) return requested;
  auto id = WorkerIdentity(call);
  if (!id.ok()) return id.status();
  if (!requested.empty() && requested != *id) {
    return PermissionDenied("worker_id \"" + requested + "\": this client certificate is for worker \"" + *id + "\"");
  }
  return id;
}

}  // namespace pipecoord::coordinator
