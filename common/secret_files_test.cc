#include "common/secret_files.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace pipecoord {
namespace {

std::string Write(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(SecretFilesTest, TokenFileLosesItsTrailingNewline) {
  auto t = ReadTokenFile("--token-file", Write("token", "0123456789abcdef0123\n"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t, "0123456789abcdef0123");
}

TEST(SecretFilesTest, TokenRulesNameTheFlagAndPathButNeverTheToken) {
  const std::string placeholder = Write("placeholder", "REPLACE-ME");
  auto t = ReadTokenFile("--token-file", placeholder);
  EXPECT_EQ(t.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(t.status().message(), "--token-file \"" + placeholder +
                                      "\": the token must be 16..4096 characters (e.g. `openssl rand -hex 32`), got 10");
  auto spaced = ReadTokenFile("--token-file", Write("spaced", "0123456789 abcdef0123"));
  EXPECT_EQ(spaced.status().message().find("0123456789"), std::string::npos);
  EXPECT_NE(spaced.status().message().find("visible ASCII characters without spaces"), std::string::npos);
  EXPECT_EQ(ReadTokenFile("--token-file", "/nonexistent/token").status().message(),
            "--token-file: cannot open /nonexistent/token: No such file or directory");
  EXPECT_EQ(ReadTokenFile("--token-file", "").status().message(), "--token-file: a file path is required");
  EXPECT_EQ(CheckToken("--token", std::string(4097, 'a')).code(), Code::kInvalidArgument);
  EXPECT_TRUE(CheckToken("--token", std::string(16, 'a')).ok());
}

TEST(SecretFilesTest, PemFilesMustHoldTheirKindOfBlock) {
  const std::string cert = Write("c.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
  const std::string key = Write("k.pem", "-----BEGIN EC PRIVATE KEY-----\nMHc\n-----END EC PRIVATE KEY-----\n");
  EXPECT_TRUE(ReadPemFile("--tls-cert", cert, PemKind::kCertificate).ok());
  EXPECT_TRUE(ReadPemFile("--tls-key", key, PemKind::kPrivateKey).ok());
  EXPECT_EQ(ReadPemFile("--tls-cert", key, PemKind::kCertificate).status().message(),
            "--tls-cert: \"" + key + "\" holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
  EXPECT_EQ(ReadPemFile("--tls-key", cert, PemKind::kPrivateKey).status().message(),
            "--tls-key: \"" + cert + "\" holds no PEM private key (-----BEGIN PRIVATE KEY-----)");
  const char* dir = std::getenv("TEST_TMPDIR");
  EXPECT_NE(ReadPemFile("--tls-ca", dir ? dir : "/tmp", PemKind::kCertificate).status().message().find("is not a regular file"),
            std::string::npos);
}

}  // namespace
}  // namespace pipecoord
