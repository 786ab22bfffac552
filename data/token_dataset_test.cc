// Token datasets on disk: files written by an independent Python script (testdata/
// write_token_datasets.py) read back exactly, and each kind of bad data refused with the file
// and the rule.
#include "data/token_dataset.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/sequence_sampler.h"
#include "data/test_files.h"

namespace pipecoord::data {
namespace {

using testing::CopyFile;
using testing::FreshDir;
using testing::kMegatronCoreWritten;
using testing::kPythonWritten;
using testing::ReadBytes;
using testing::WriteBytes;

TEST(TokenDataset, ReadsPythonsFlatUint16FileExactly) {
  auto ds = TokenDataset::Open(kPythonWritten + "flat_u16");
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  EXPECT_EQ(ds->format(), TokenDataset::Format::kFlat);
  EXPECT_EQ(ds->bin_path(), kPythonWritten + "flat_u16.bin");
  EXPECT_EQ(ds->layout_path(), kPythonWritten + "flat_u16.json");
  EXPECT_EQ(ds->vocab_size(), 1000);
  ASSERT_EQ(ds->tokens().size(), 1000u);
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(ds->tokens().At(i), static_cast<int64_t>((37 * i + 11) % 1000)) << i;
  EXPECT_EQ(ds->document_starts(), (std::vector<uint64_t>{0, 400, 750}));
  // "PREFIX.bin" names the same dataset; a model vocabulary at least the sidecar's is fine.
  TokenDatasetOptions options;
  options.vocab_size = 1000;
  EXPECT_TRUE(TokenDataset::Open(kPythonWritten + "flat_u16.bin", options).ok());
}

TEST(TokenDataset, ReadsPythonsFlatUint32FileExactly) {
  auto ds = TokenDataset::Open(kPythonWritten + "flat_u32");
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  EXPECT_EQ(ds->tokens().dtype(), TokenDtype::kUint32);
  ASSERT_EQ(ds->tokens().size(), 300u);
  int above_uint16 = 0;
  for (uint64_t i = 0; i < 300; ++i) {
    ASSERT_EQ(ds->tokens().At(i), static_cast<int64_t>((7919 * i + 13) % 100000)) << i;
    above_uint16 += ds->tokens().At(i) > 65535;
  }
  EXPECT_GT(above_uint16, 0);
  EXPECT_EQ(ds->document_starts(), (std::vector<uint64_t>{0}));
}

// Written by hand (write_token_datasets.py) and by megatron-core's own IndexedDatasetBuilder
// (write_megatron_core.py): the same documents, read the same.
TEST(TokenDataset, ReadsPythonsMegatronIndexedDatasetsExactly) {
  for (const std::string& dir : {kPythonWritten, kMegatronCoreWritten}) {
  SCOPED_TRACE(dir);
  TokenDatasetOptions options;
  options.vocab_size = 1000;
  auto u16 = TokenDataset::Open(dir + "megatron_u16", options);
  ASSERT_TRUE(u16.ok()) << u16.status().message();
  EXPECT_EQ(u16->format(), TokenDataset::Format::kMegatron);
  EXPECT_EQ(u16->tokens().dtype(), TokenDtype::kUint16);
  ASSERT_EQ(u16->tokens().size(), 53u);
  for (uint64_t i = 0; i < 53; ++i) ASSERT_EQ(u16->tokens().At(i), static_cast<int64_t>((37 * i + 11) % 1000)) << i;
  // Documents [3, 2], [], [10, 7], [1], [30, 0] (sequence lengths): the empty one dropped.
  EXPECT_EQ(u16->document_starts(), (std::vector<uint64_t>{0, 5, 22, 23}));

  options.vocab_size = 70000;
  auto i32 = TokenDataset::Open(dir + "megatron_i32", options);
  ASSERT_TRUE(i32.ok()) << i32.status().message();
  EXPECT_EQ(i32->tokens().dtype(), TokenDtype::kInt32);
  ASSERT_EQ(i32->tokens().size(), 53u);
  for (uint64_t i = 0; i < 53; ++i) ASSERT_EQ(i32->tokens().At(i), static_cast<int64_t>((7919 * i + 13) % 70000)) << i;
  EXPECT_EQ(i32->document_starts(), (std::vector<uint64_t>{0, 5, 22, 23}));
  }
}

TEST(TokenDataset, TheSamplerReadsThePythonDatasetsTokens) {
  auto ds = TokenDataset::Open(kPythonWritten + "flat_u16");
  ASSERT_TRUE(ds.ok());
  auto split = SplitTail(ds->tokens().size(), 0.1);
  SamplingSpec spec;
  spec.seed = 3;
  spec.seq_len = 16;
  spec.micro_batch_size = 2;
  spec.microbatches = 2;
  spec.dp = 2;
  auto sampler = SequenceSampler::Create(split->train, spec, SequenceSampler::Order::kShuffled);
  ASSERT_TRUE(sampler.ok()) << sampler.status().message();
  auto starts = sampler->MicroBatchStarts(3, 1, 1);
  auto batch = sampler->Read(ds->tokens(), 3, 1, 1);
  ASSERT_TRUE(batch.ok());
  for (int row = 0; row < 2; ++row) {
    const uint64_t start = (*starts)[row];
    EXPECT_LE(start + 17, 900u);  // inside the training head
    for (int t = 0; t < 16; ++t) {
      EXPECT_EQ(batch->inputs[row * 16 + t], static_cast<int32_t>((37 * (start + t) + 11) % 1000));
      EXPECT_EQ(batch->targets[row * 16 + t], static_cast<int32_t>((37 * (start + t + 1) + 11) % 1000));
    }
  }
}

// Each kind of bad data, from copies of the Python files changed one way.
class BadData : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = FreshDir(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "/"; }
  std::string Copy(const std::string& from, const std::string& to) {
    CopyFile(kPythonWritten + from, dir_ + to);
    return dir_ + to;
  }
  std::string Error(const std::string& prefix, int64_t vocab = 0) {
    TokenDatasetOptions options;
    options.vocab_size = vocab;
    auto ds = TokenDataset::Open(prefix, options);
    return ds.ok() ? "opened" : ds.status().message();
  }
  std::string dir_;
};

TEST_F(BadData, NoSidecarOrBoth) {
  Copy("flat_u16.bin", "d.bin");
  EXPECT_EQ(Error(dir_ + "d"), dir_ + "d: no dataset: neither " + dir_ + "d.json (flat token sidecar) nor " + dir_ +
                                   "d.idx (Megatron-LM index) exists");
  Copy("flat_u16.json", "d.json");
  Copy("megatron_u16.idx", "d.idx");
  EXPECT_EQ(Error(dir_ + "d"), dir_ + "d: both " + dir_ + "d.json (flat) and " + dir_ +
                                   "d.idx (Megatron-LM) exist; keep the one that describes " + dir_ + "d.bin");
}

TEST_F(BadData, AMissingBin) {
  Copy("flat_u16.json", "d.json");
  EXPECT_EQ(Error(dir_ + "d"), "cannot open " + dir_ + "d.bin: No such file or directory");
}

TEST_F(BadData, ATruncatedFlatFile) {
  const std::string bin = ReadBytes(kPythonWritten + "flat_u16.bin");
  WriteBytes(dir_ + "d.bin", bin.substr(0, bin.size() - 1));
  Copy("flat_u16.json", "d.json");
  EXPECT_EQ(Error(dir_ + "d"), dir_ + "d.bin: 1999 bytes is not a whole number of uint16 tokens (2 bytes each, as " + dir_ +
                                   "d.json says): the file is truncated");
}

TEST_F(BadData, ASidecarThatDisagreesWithTheFileSize) {
  const std::string bin = ReadBytes(kPythonWritten + "flat_u16.bin");
  WriteBytes(dir_ + "d.bin", bin.substr(0, bin.size() - 4));
  Copy("flat_u16.json", "d.json");
  EXPECT_EQ(Error(dir_ + "d"), dir_ + "d.json says 1000 tokens (2000 bytes of uint16), but " + dir_ +
                                   "d.bin has 1996 bytes (998 tokens)");
  WriteBytes(dir_ + "d.json", R"({"dtype": "uint16", "vocab_size": 1000, "document_starts": [0, 998]})");
  EXPECT_EQ(Error(dir_ + "d"), dir_ + "d.json: document_starts[1] = 998 is not below the 998 tokens of " + dir_ + "d.bin");
}

TEST_F(BadData, ATokenIdAtOrAboveTheVocabularyWithItsOffset) {
  Copy("flat_u16.bin", "d.bin");
  WriteBytes(dir_ + "d.json", R"({"dtype": "uint16", "vocab_size": 500})");
  // (37 i + 11) mod 1000 first reaches 500 at i = 14 (529).
  EXPECT_EQ(Error(dir_ + "d"), dir_ + "d.bin: token 529 at offset 14 (byte 28) is >= the vocabulary size 500 (" + dir_ +
                                   "d.json's vocab_size)");
  Copy("flat_u16.json", "d.json");
  EXPECT_EQ(Error(dir_ + "d", 256), dir_ + "d.json: vocab_size 1000 is larger than the model's vocabulary (256)");

  Copy("megatron_u16.bin", "m.bin");
  Copy("megatron_u16.idx", "m.idx");
  EXPECT_EQ(Error(dir_ + "m", 500), dir_ + "m.bin: token 529 at offset 14 (byte 28) is >= the vocabulary size 500 (the "
                                           "model's vocabulary)");
  EXPECT_EQ(Error(dir_ + "m"), dir_ + "m.idx: a Megatron-LM index records no vocabulary size; give the model's");
  // Checking the ids can be left for later: the structure is still checked.
  TokenDatasetOptions unchecked;
  unchecked.vocab_size = 500;
  unchecked.check_tokens = false;
  EXPECT_TRUE(TokenDataset::Open(dir_ + "m", unchecked).ok());
}

TEST_F(BadData, AMegatronIndexWithABadMagicOrVersionOrATruncatedBin) {
  const std::string idx = ReadBytes(kPythonWritten + "megatron_u16.idx");
  Copy("megatron_u16.bin", "m.bin");
  WriteBytes(dir_ + "m.idx", "NOTANIDX" + idx.substr(8));
  EXPECT_EQ(Error(dir_ + "m", 1000), dir_ + "m.idx: bad magic: the file starts with 4e 4f 54 41 4e 49 44 58 00, a "
                                             "Megatron-LM index with 4d 4d 49 44 49 44 58 00 00 (\"MMIDIDX\\0\\0\")");
  std::string v2 = idx;
  v2[9] = 2;
  WriteBytes(dir_ + "m.idx", v2);
  EXPECT_EQ(Error(dir_ + "m", 1000), dir_ + "m.idx: version 2, only version 1 is known");
  WriteBytes(dir_ + "m.idx", idx.substr(0, idx.size() - 8));
  EXPECT_EQ(Error(dir_ + "m", 1000), dir_ + "m.idx: truncated: 158 bytes, but 7 sequences and 6 document index entries "
                                             "take 166");
  WriteBytes(dir_ + "m.idx", idx);
  const std::string bin = ReadBytes(kPythonWritten + "megatron_u16.bin");
  WriteBytes(dir_ + "m.bin", bin.substr(0, 100));
  EXPECT_EQ(Error(dir_ + "m", 1000), dir_ + "m.bin: 100 bytes, but " + dir_ +
                                             "m.idx's 7 sequences of 53 uint16 tokens take 106: truncated");
}

TEST(MappedFile, MapsEmptyFilesAndRefusesFolders) {
  const std::string dir = FreshDir("mapped");
  WriteBytes(dir + "/empty", "");
  auto empty = MappedFile::Open(dir + "/empty");
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_EQ(empty->size(), 0u);
  EXPECT_EQ(MappedFile::Open(dir).status().message(), dir + ": not a regular file");
  WriteBytes(dir + "/three", "abc");
  auto three = MappedFile::Open(dir + "/three");
  ASSERT_TRUE(three.ok());
  const uint8_t* before = three->bytes().data();
  MappedFile moved = std::move(three).value();
  EXPECT_EQ(moved.bytes().data(), before);  // moving keeps the mapping where it is
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(moved.bytes().data()), 3), "abc");
}

}  // namespace
}  // namespace pipecoord::data
