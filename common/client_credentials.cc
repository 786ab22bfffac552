#include "common/client_credentials.h"

#include <grpcpp/security/credentials.h>

#include "common/secret_files.h"

namespace pipecoord {

Result<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(const ClientTlsFlags& f) {
  if (f.cert_file.empty() != f.key_file.empty()) {
    return InvalidArgument(f.cert_file.empty() ? "--tls-key: needs --tls-cert (the certificate of that key)"
                                               : "--tls-cert: needs --tls-key (the certificate's private key)");
  }
  if (f.ca_file.empty()) {
    if (!f.cert_file.empty()) return InvalidArgument("--tls-cert: needs --tls-ca (the CA that signed the coordinator's certificate)");
    if (!f.token.empty()) return InvalidArgument("--token: needs --tls-ca: a token is only ever sent over TLS");
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions ssl;
  auto ca = ReadPemFile("--tls-ca", f.ca_file, PemKind::kCertificate);
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = std::move(ca).value();
  if (!f.cert_file.empty()) {
    auto cert = ReadPemFile("--tls-cert", f.cert_file, PemKind::kCertificate);
    if (!cert.ok()) return cert.status();
    auto key = ReadPemFile("--tls-key", f.key_file, PemKind::kPrivateKey);
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = std::move(cert).value();
    ssl.pem_private_key = std::move(key).value();
  }
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::SslCredentials(ssl);
  if (!f.token.empty()) {
    PIPECOORD_RETURN_IF_ERROR(CheckToken("--token", f.token));
    creds = grpc::CompositeChannelCredentials(creds, grpc::AccessTokenCredentials(f.token));
  }
  if (creds == nullptr) return InvalidArgument("--tls-ca/--tls-cert/--tls-key: the TLS library refused the files");
  return creds;
}

}  // namespace pipecoord
