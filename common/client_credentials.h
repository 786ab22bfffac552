// ClientCredentials: how a gRPC client of the coordinator (the worker daemon, pipectl) secures
// its channel, from its flags. Without --tls-ca: plaintext (local development). With it: TLS
// that verifies the coordinator's certificate against that CA, plus a client certificate
// (--tls-cert and --tls-key: workers, mutual TLS) and/or a bearer token (pipectl's --token: sent
// as "authorization: Bearer TOKEN" on every call, and only ever over TLS).
#ifndef PIPECOORD_COMMON_CLIENT_CREDENTIALS_H_
#define PIPECOORD_COMMON_CLIENT_CREDENTIALS_H_

#include <grpcpp/security/credentials.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace pipecoord {

struct ClientTlsFlags {
  std::string ca_file;    // --tls-ca; empty: plaintext
  std::string cert_file;  // --tls-cert; with key_file, or neither
  std::string key_file;   // --tls-key
  std::string token;      // --token (pipectl); empty: none
};

// INVALID_ARGUMENT naming the flag and the rule: a certificate without its key (or the other way
// round), a certificate or token without --tls-ca, an unreadable file, a malformed token.
Result<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(const ClientTlsFlags& flags);

}  // namespace pipecoord

#endif  // PIPECOORD_COMMON_CLIENT_CREDENTIALS_H_
