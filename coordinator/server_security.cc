#include "coordinator/server_security.h"

#include <grpcpp/security/server_credentials.h>

#include "common/secret_files.h"

namespace pipecoord::coordinator {

Result<ServerSecurity> ServerSecurityFromFlags(const ServerSecurityFlags& f) {
  ServerSecurity out;
  const bool any = !f.tls_cert.empty() || !f.tls_key.empty() || !f.tls_ca.empty() || !f.token_file.empty();
  if (!any) {
    out.credentials = grpc::InsecureServerCredentials();
    out.auth = Auth::Open();
    return out;
  }
  // Everything or nothing: name the first piece missing.
  if (f.tls_cert.empty()) return InvalidArgument("--tls-cert: required with --tls-key, --tls-ca or --token-file (TLS is all or nothing)");
  if (f.tls_key.empty()) return InvalidArgument("--tls-key: required with --tls-cert (the certificate's private key)");
  if (f.tls_ca.empty()) {
    return InvalidArgument("--tls-ca: required with --tls-cert (the CA that signs workers' client certificates)");
  }
  if (f.token_file.empty()) {
    return InvalidArgument("--token-file: required with --tls-cert (the bearer token SubmitJob and CancelJob need)");
  }
  auto cert = ReadPemFile("--tls-cert", f.tls_cert, PemKind::kCertificate);
  if (!cert.ok()) return cert.status();
  auto key = ReadPemFile("--tls-key", f.tls_key, PemKind::kPrivateKey);
  if (!key.ok()) return key.status();
  auto ca = ReadPemFile("--tls-ca", f.tls_ca, PemKind::kCertificate);
  if (!ca.ok()) return ca.status();
  auto token = ReadTokenFile("--token-file", f.token_file);
  if (!token.ok()) return token.status();

  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = std::move(ca).value();
  ssl.pem_key_cert_pairs.push_back({std::move(key).value(), std::move(cert).value()});
  out.credentials = grpc::SslServerCredentials(ssl);
  if (out.credentials == nullptr) return InvalidArgument("--tls-cert/--tls-key/--tls-ca: the TLS library refused the files");
  out.auth = Auth::Secured(*token);
  return out;
}

}  // namespace pipecoord::coordinator
