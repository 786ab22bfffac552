// Text to a byte-level dataset: every byte becomes its own id, the split falls where SplitTail
// says, documents follow the input files, and the result opens as a flat dataset.
#include "data/byte_dataset_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "data/flat_sidecar.h"
#include "data/test_files.h"
#include "data/token_dataset.h"

namespace pipecoord::data {
namespace {

using testing::FreshDir;
using testing::ReadBytes;
using testing::WriteBytes;

std::string Text(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed;
  for (char& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);  // every byte value, 0x80..0xFF included
  }
  return s;
}

std::string Tokens(const TokenDataset& ds) {
  std::string s;
  for (uint64_t i = 0; i < ds.tokens().size(); ++i) s.push_back(static_cast<char>(ds.tokens().At(i)));
  return s;
}

TEST(ByteDatasetWriter, WritesEachByteAsATokenSplitsTheTailAndKeepsDocuments) {
  const std::string dir = FreshDir("bytes");
  const std::string a = Text(1000, 1), b = "the end.\n" + Text(41, 2);
  WriteBytes(dir + "/a.txt", a);
  WriteBytes(dir + "/empty.txt", "");
  WriteBytes(dir + "/b.txt", b);
  std::vector<std::pair<uint64_t, uint64_t>> progress;
  ByteDatasetOptions options;
  options.inputs = {dir + "/a.txt", dir + "/empty.txt", dir + "/b.txt"};
  options.out_dir = dir + "/out";
  options.val_fraction = 0.1;
  options.progress = [&](uint64_t done, uint64_t total) { progress.emplace_back(done, total); };
  auto report = WriteByteDataset(options);
  ASSERT_TRUE(report.ok()) << report.status().message();
  // 1050 bytes: validation is the last round(105) = 105, from offset 945 (inside a.txt).
  EXPECT_EQ(report->input_bytes, 1050u);
  EXPECT_EQ(report->input_files, 3);
  EXPECT_EQ(report->train.bin_path, dir + "/out/train.bin");
  EXPECT_EQ(report->train.sidecar_path, dir + "/out/train.json");
  EXPECT_EQ(report->train.tokens, 945u);
  EXPECT_EQ(report->train.documents, 1u);
  EXPECT_EQ(report->val.bin_path, dir + "/out/val.bin");
  EXPECT_EQ(report->val.tokens, 105u);
  EXPECT_EQ(report->val.documents, 2u);  // a.txt's tail, then b.txt at 1000 - 945 = 55
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back(), (std::pair<uint64_t, uint64_t>{1050, 1050}));

  EXPECT_EQ(ReadBytes(dir + "/out/train.json"),
            "{\"dtype\": \"uint16\", \"vocab_size\": 256, \"tokens\": 945, \"document_starts\": [0], \"tokenizer\": "
            "\"bytes\"}\n");
  EXPECT_EQ(ReadBytes(dir + "/out/val.json"),
            "{\"dtype\": \"uint16\", \"vocab_size\": 256, \"tokens\": 105, \"document_starts\": [0, 55], \"tokenizer\": "
            "\"bytes\"}\n");
  const std::string text = a + b;
  auto train = TokenDataset::Open(dir + "/out/train");
  ASSERT_TRUE(train.ok()) << train.status().message();
  EXPECT_EQ(train->vocab_size(), 256);
  EXPECT_EQ(Tokens(*train), text.substr(0, 945));
  auto val = TokenDataset::Open(dir + "/out/val");
  ASSERT_TRUE(val.ok()) << val.status().message();
  EXPECT_EQ(Tokens(*val), text.substr(945));
  EXPECT_EQ(val->document_starts(), (std::vector<uint64_t>{0, 55}));
  // uint16 little-endian: the byte, then a zero byte.
  const std::string raw = ReadBytes(dir + "/out/train.bin");
  ASSERT_EQ(raw.size(), 1890u);
  EXPECT_EQ(raw[0], a[0]);
  EXPECT_EQ(raw[1], '\0');
  for (const auto& e : std::filesystem::directory_iterator(dir + "/out")) {
    EXPECT_EQ(e.path().extension(), e.path().extension() == ".bin" ? ".bin" : ".json") << e.path() << " left behind";
  }
}

TEST(ByteDatasetWriter, LargeInputsCrossTheCutInsideAChunk) {
  const std::string dir = FreshDir("large");
  const std::string big = Text((3 << 20) + 12345, 7);
  WriteBytes(dir + "/big.txt", big);
  ByteDatasetOptions options;
  options.inputs = {dir + "/big.txt", dir + "/big.txt"};  // the same file twice: two documents
  options.out_dir = dir + "/out";
  options.val_fraction = 0.3;
  int calls = 0;
  options.progress = [&](uint64_t, uint64_t) { ++calls; };
  auto report = WriteByteDataset(options);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_GE(calls, 6);  // one per 1 MiB chunk
  const std::string text = big + big;
  const uint64_t val = static_cast<uint64_t>(std::llround(0.3 * text.size()));
  auto train = TokenDataset::Open(dir + "/out/train");
  auto held = TokenDataset::Open(dir + "/out/val");
  ASSERT_TRUE(train.ok() && held.ok());
  EXPECT_EQ(Tokens(*train), text.substr(0, text.size() - val));
  EXPECT_EQ(Tokens(*held), text.substr(text.size() - val));
  EXPECT_EQ(train->document_starts(), (std::vector<uint64_t>{0, big.size()}));
  EXPECT_EQ(held->document_starts(), (std::vector<uint64_t>{0}));
}

TEST(ByteDatasetWriter, WithoutAValidationFractionWritesTrainOnly) {
  const std::string dir = FreshDir("noval");
  WriteBytes(dir + "/a.txt", "hello");
  ByteDatasetOptions options;
  options.inputs = {dir + "/a.txt"};
  options.out_dir = dir + "/out";
  options.val_fraction = 0;
  auto report = WriteByteDataset(options);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->train.tokens, 5u);
  EXPECT_TRUE(report->val.bin_path.empty());
  EXPECT_FALSE(std::filesystem::exists(dir + "/out/val.bin"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/out/val.json"));
}

TEST(ByteDatasetWriter, RefusesInputsItCannotUse) {
  const std::string dir = FreshDir("refusals");
  WriteBytes(dir + "/empty.txt", "");
  WriteBytes(dir + "/tiny.txt", "abc");
  WriteBytes(dir + "/file", "x");
  auto error = [&](std::vector<std::string> inputs, double fraction, std::string out = "") {
    ByteDatasetOptions options;
    options.inputs = std::move(inputs);
    options.out_dir = out.empty() ? dir + "/out" : out;
    options.val_fraction = fraction;
    auto r = WriteByteDataset(options);
    return r.ok() ? "written" : r.status().message();
  };
  EXPECT_EQ(error({}, 0.1), "no input text files");
  EXPECT_EQ(error({dir + "/nope.txt"}, 0.1), "cannot open " + dir + "/nope.txt: No such file or directory");
  EXPECT_EQ(error({dir}, 0.1), dir + ": not a regular file (its size is needed before reading)");
  EXPECT_EQ(error({dir + "/empty.txt"}, 0.1), "the inputs hold no text (0 bytes)");
  EXPECT_EQ(error({dir + "/tiny.txt"}, 1.0), "validation fraction must be in [0, 1), got 1.000000");
  EXPECT_EQ(error({dir + "/tiny.txt"}, 0.1),
            "a validation fraction of 0.100000 of 3 bytes leaves 3 for training and 0 for validation; each needs at "
            "least 2 (a token and the one after it)");
  EXPECT_EQ(error({dir + "/tiny.txt"}, 0, dir + "/file"), dir + "/file: exists and is not a folder");
  EXPECT_EQ(error({dir + "/tiny.txt"}, 0, dir + "/no/such/folder"),
            "cannot create the folder " + dir + "/no/such/folder: No such file or directory");
}

}  // namespace
}  // namespace pipecoord::data
