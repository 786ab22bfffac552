#include "common/secret_files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace pipecoord {
namespace {

constexpr size_t kMaxPemBytes = 1 << 20;
constexpr size_t kMinTokenChars = 16, kMaxTokenChars = 4096;

Result<std::string> ReadSmallFile(const std::string& flag, const std::string& path, size_t max_bytes) {
  if (path.empty()) return InvalidArgument(flag + ": a file path is required");
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return InvalidArgument(flag + ": cannot open " + path + ": " + std::strerror(errno));
  if (!S_ISREG(info.st_mode)) return InvalidArgument(flag + ": \"" + path + "\" is not a regular file");
  if (static_cast<size_t>(info.st_size) > max_bytes) {
    return InvalidArgument(flag + ": \"" + path + "\" is " + std::to_string(info.st_size) + " bytes, over the limit of " +
                           std::to_string(max_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(flag + ": cannot open " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) return InvalidArgument(flag + ": cannot read " + path + ": " + std::strerror(errno));
  return text.str();
}

}  // namespace

Result<std::string> ReadPemFile(const std::string& flag, const std::string& path, PemKind kind) {
  auto text = ReadSmallFile(flag, path, kMaxPemBytes);
  if (!text.ok()) return text.status();
  if (kind == PemKind::kCertificate) {
    if (text->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      return InvalidArgument(flag + ": \"" + path + "\" holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
    }
  } else {
    const size_t begin = text->find("-----BEGIN ");
    if (begin == std::string::npos || text->find("PRIVATE KEY-----", begin) == std::string::npos) {
      return InvalidArgument(flag + ": \"" + path + "\" holds no PEM private key (-----BEGIN PRIVATE KEY-----)");
    }
  }
  return text;
}

Status CheckToken(const std::string& flag, const std::string& token) {
  if (token.size() < kMinTokenChars || token.size() > kMaxTokenChars) {
    return InvalidArgument(flag + ": the token must be " + std::to_string(kMinTokenChars) + ".." +
                           std::to_string(kMaxTokenChars) + " characters (e.g. `openssl rand -hex 32`), got " +
                           std::to_string(token.size()));
  }
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return InvalidArgument(flag + ": the token must be visible ASCII characters without spaces");
    }
  }
  return Status::Ok();
}

Result<std::string> ReadTokenFile(const std::string& flag, const std::string& path) {
  auto text = ReadSmallFile(flag, path, kMaxTokenChars + 64);
  if (!text.ok()) return text.status();
  std::string token = std::move(text).value();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ' || token.back() == '\t')) {
    token.pop_back();
  }
  Status st = CheckToken(flag + " \"" + path + "\"", token);
  if (!st.ok()) return st;
  return token;
}

}  // namespace pipecoord
