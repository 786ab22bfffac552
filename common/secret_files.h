// Reading the files that hold credentials: PEM certificates and keys (--tls-ca, --tls-cert,
// --tls-key) and bearer tokens (--token-file). Every error names the flag, the path and the rule,
// and never quotes a file's contents.
#ifndef PIPECOORD_COMMON_SECRET_FILES_H_
#define PIPECOORD_COMMON_SECRET_FILES_H_

#include <string>

#include "common/status.h"

namespace pipecoord {

enum class PemKind {
  kCertificate,  // one or more "-----BEGIN CERTIFICATE-----" blocks (a chain, or a CA bundle)
  kPrivateKey,   // one "-----BEGIN ... PRIVATE KEY-----" block (PKCS#8, EC or RSA)
};

// The whole PEM file at `path` (at most 1 MiB). INVALID_ARGUMENT naming `flag` when the path is
// empty, missing, unreadable, not a regular file, too large or holds no block of that kind.
// Whether the PEM parses is left to the TLS library, which checks it when the channel or
// server is built.
Result<std::string> ReadPemFile(const std::string& flag, const std::string& path, PemKind kind);

// The bearer token in the file at `path`: its contents less trailing whitespace (a final newline
// from `echo` or an editor). INVALID_ARGUMENT naming `flag` unless the token is 16..4096
// visible ASCII characters (no spaces, as an HTTP header value carries it), e.g.
// `openssl rand -hex 32`. The length rule also refuses placeholders such as "REPLACE-ME".
Result<std::string> ReadTokenFile(const std::string& flag, const std::string& path);

// The same rule for a token that arrives another way (pipectl --token, PIPECOORD_TOKEN).
Status CheckToken(const std::string& flag, const std::string& token);

}  // namespace pipecoord

#endif  // PIPECOORD_COMMON_SECRET_FILES_H_
