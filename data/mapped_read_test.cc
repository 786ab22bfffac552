// ReadMapped over a real file mapping that the test truncates under it (what `truncate -s 0` on a
// dataset does to a running job): the read reports the fault instead of ending the process, the
// bytes before it were read, and reads of other memory are untouched.
#include "data/mapped_read.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "data/mapped_file.h"
#include "data/sequence_sampler.h"
#include "data/token_stream.h"

namespace pipecoord::data {
namespace {

std::string TempFile(const std::string& name, size_t tokens) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name + "-" + std::to_string(getpid());
  FILE* f = std::fopen(path.c_str(), "wb");
  for (size_t i = 0; i < tokens; ++i) {
    const uint8_t le[2] = {static_cast<uint8_t>(i % 251), 0};
    std::fwrite(le, 1, 2, f);
  }
  std::fclose(f);
  return path;
}

TEST(MappedReadTest, ATruncatedFilesFaultIsReportedAndTheProcessLives) {
  constexpr size_t kTokens = 4 * 4096;  // 8 pages of uint16
  const std::string path = TempFile("mapped-read", kTokens);
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  TokenStream tokens(file->bytes(), TokenDtype::kUint16);
  std::vector<int32_t> out(16);
  ASSERT_TRUE(tokens.CopyTo(kTokens - 16, out));
  EXPECT_EQ(out[15], static_cast<int32_t>((kTokens - 1) % 251));
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  EXPECT_FALSE(tokens.CopyTo(kTokens - 16, out));  // faulted: reported, not fatal
  EXPECT_FALSE(tokens.CopyTo(0, out));             // and again
  // Through the sampler: an error naming the tokens, as the job sees it.
  const std::vector<uint64_t> starts = {100};
  auto batch = ReadSequences(tokens, starts, 8);
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().code(), Code::kUnavailable);
  EXPECT_EQ(batch.status().message(),
            "reading tokens 100..108 faulted (SIGBUS): the file was truncated or replaced while the job ran");
  std::remove(path.c_str());
}

TEST(MappedReadTest, ReadsOfIntactMemoryRunAndNest) {
  std::vector<int> a(64, 7), b(64, 9);
  int sum = 0;
  auto inner = [&] { for (int v : b) sum += v; };
  auto outer = [&] {
    for (int v : a) sum += v;
    EXPECT_TRUE(ReadMapped(b.data(), b.size() * sizeof(int), inner));
  };
  EXPECT_TRUE(ReadMapped(a.data(), a.size() * sizeof(int), outer));
  EXPECT_EQ(sum, 64 * 7 + 64 * 9);
}

}  // namespace
}  // namespace pipecoord::data
