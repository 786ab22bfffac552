#include "coordinator/call_credentials.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_context.h>

namespace pipecoord::coordinator {

CallCredentials CallCredentialsOf(const grpc::ServerContextBase& context) {
  CallCredentials out;
  auto range = context.client_metadata().equal_range("authorization");
  for (auto it = range.first; it != range.second; ++it) out.authorization.emplace_back(it->second.data(), it->second.size());
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return out;
  bool tls = false;
  for (const grpc::string_ref& v : auth->FindPropertyValues(GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME)) {
    tls = tls || v == GRPC_SSL_TRANSPORT_SECURITY_TYPE;
  }
  // Over TLS the peer is authenticated only by a client certificate that the handshake verified
  // against --tls-ca (the server requests one and refuses one that does not verify).
  out.client_certificate = tls && auth->IsPeerAuthenticated() &&
                           !auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME).empty();
  if (!out.client_certificate) return out;
  for (const grpc::string_ref& v : auth->FindPropertyValues(GRPC_PEER_URI_PROPERTY_NAME)) {
    out.certificate_uris.emplace_back(v.data(), v.size());
  }
  return out;
}

}  // namespace pipecoord::coordinator
