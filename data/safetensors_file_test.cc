// Safetensors files on disk: a file written by Python's standard library (testdata/
// write_safetensors.py) read back exactly, ours read back by Python (testdata/
// read_safetensors.py), views that point into the mapping, and sharded checkpoints.
#include "data/safetensors_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "data/little_endian.h"
#include "data/safetensors_checkpoint.h"
#include "data/test_files.h"

namespace pipecoord::data {
namespace {

using testing::FreshDir;
using testing::kPythonWritten;
using testing::ReadBytes;
using testing::WriteBytes;

std::span<const uint8_t> Bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

std::string Floats(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

std::vector<float> AsFloats(const TensorView& view) {
  std::vector<float> out(view.info->elements(), -12345.0f);
  const Status st = view.CopyToFloat(out);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

// The official safetensors package's own file (safetensors.torch.save_file: F32, BF16, F16, I64).
TEST(SafetensorsFile, ReadsTheOfficialPackagesFileExactly) {
  auto file = SafetensorsFile::Open(testing::kOfficialWritten + "model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto metadata = file->layout().metadata;  // in the file's order, which the package chooses
  std::sort(metadata.begin(), metadata.end());
  EXPECT_EQ(metadata, (std::vector<std::pair<std::string, std::string>>{{"format", "pt"}, {"source", "safetensors"}}));
  ASSERT_EQ(file->layout().tensors.size(), 4u);
  auto weight = file->Tensor("weight");
  ASSERT_TRUE(weight.ok());
  EXPECT_EQ(weight->info->dtype, SafetensorsDtype::kF32);
  EXPECT_EQ(weight->info->shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(AsFloats(*weight), (std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f}));
  auto norm = file->Tensor("norm");
  ASSERT_TRUE(norm.ok());
  EXPECT_EQ(norm->info->dtype, SafetensorsDtype::kBF16);
  EXPECT_EQ(AsFloats(*norm), (std::vector<float>{1.0f, -2.5f, 0.15625f, 65280.0f}));
  auto bias = file->Tensor("bias");
  ASSERT_TRUE(bias.ok());
  EXPECT_EQ(bias->info->dtype, SafetensorsDtype::kF16);
  EXPECT_EQ(AsFloats(*bias), (std::vector<float>{1.5f, -0.25f}));
  auto ids = file->Tensor("ids");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->info->dtype, SafetensorsDtype::kI64);
  ASSERT_EQ(ids->bytes.size(), 24u);
  std::vector<int64_t> values(3);
  std::memcpy(values.data(), ids->bytes.data(), 24);  // little-endian on this machine, as the file
  EXPECT_EQ(values, (std::vector<int64_t>{-3, 0, int64_t{1} << 40}));
}

TEST(SafetensorsFile, ReadsPythonsFileExactly) {
  auto file = SafetensorsFile::Open(kPythonWritten + "model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->layout().metadata,
            (std::vector<std::pair<std::string, std::string>>{{"format", "pt"}, {"source", "python struct+json"}}));
  ASSERT_EQ(file->layout().tensors.size(), 6u);

  auto embed = file->Tensor("model.embed_tokens.weight");
  ASSERT_TRUE(embed.ok());
  EXPECT_EQ(embed->info->dtype, SafetensorsDtype::kF32);
  EXPECT_EQ(embed->info->shape, (std::vector<uint64_t>{3, 4}));
  std::vector<float> want;
  for (int i = 0; i < 12; ++i) want.push_back(static_cast<float>((i - 5) * 0.375));
  EXPECT_EQ(AsFloats(*embed), want);

  auto norm = file->Tensor("model.norm.weight");
  ASSERT_TRUE(norm.ok());
  EXPECT_EQ(norm->info->dtype, SafetensorsDtype::kBF16);
  const std::vector<float> norm_values = AsFloats(*norm);
  EXPECT_EQ(norm_values, (std::vector<float>{1.0f, -2.5f, 0.15625f, 65280.0f, -0.0f}));
  EXPECT_TRUE(std::signbit(norm_values[4]));

  auto bias = file->Tensor("lm_head.bias");
  ASSERT_TRUE(bias.ok());
  EXPECT_EQ(bias->info->dtype, SafetensorsDtype::kF16);
  EXPECT_EQ(AsFloats(*bias), (std::vector<float>{1.5f, -0.25f}));

  auto positions = file->Tensor("positions");
  ASSERT_TRUE(positions.ok());
  EXPECT_EQ(positions->info->dtype, SafetensorsDtype::kI32);
  ASSERT_EQ(positions->bytes.size(), 16u);
  const int32_t ids[4] = {LoadI32(positions->bytes.data()), LoadI32(positions->bytes.data() + 4),
                          LoadI32(positions->bytes.data() + 8), LoadI32(positions->bytes.data() + 12)};
  EXPECT_EQ(std::vector<int32_t>(ids, ids + 4), (std::vector<int32_t>{-3, 0, 7, 2147483647}));
  std::vector<float> wrong(4);
  EXPECT_EQ(positions->CopyToFloat(wrong).message(), "tensor \"positions\" is I32, not F32, BF16 or F16");

  auto step = file->Tensor("step");
  ASSERT_TRUE(step.ok());
  EXPECT_TRUE(step->info->shape.empty());
  EXPECT_EQ(step->info->elements(), 1u);
  EXPECT_EQ(LoadI64(step->bytes.data()), 42);

  auto empty = file->Tensor("empty");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->info->shape, (std::vector<uint64_t>{0, 3}));
  EXPECT_TRUE(empty->bytes.empty());

  EXPECT_EQ(file->Tensor("model.layers.0.mlp.up_proj.weight").status().message(),
            kPythonWritten + "model.safetensors has no tensor \"model.layers.0.mlp.up_proj.weight\"");
}

TEST(SafetensorsFile, ViewsPointIntoTheMappingWithoutACopy) {
  auto file = SafetensorsFile::Open(kPythonWritten + "model.safetensors");
  ASSERT_TRUE(file.ok());
  for (const SafetensorsTensor& t : file->layout().tensors) {
    auto view = file->Tensor(t.name);
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(view->bytes.data(), file->bytes().data() + file->layout().data_start + t.begin) << t.name;
    EXPECT_EQ(view->bytes.size(), t.bytes());
  }
}

TEST(SafetensorsFile, RefusesATruncatedFileNamingTheTensorThatRunsPastTheEnd) {
  const std::string dir = FreshDir("truncated");
  const std::string bytes = ReadBytes(kPythonWritten + "model.safetensors");
  WriteBytes(dir + "/m.safetensors", bytes.substr(0, bytes.size() - 1));
  auto file = SafetensorsFile::Open(dir + "/m.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().message(),
            dir + "/m.safetensors: tensor \"step\": data_offsets [78, 86] run past the end of the data buffer (85 bytes)");
  EXPECT_EQ(SafetensorsFile::Open(dir + "/none.safetensors").status().message(),
            "cannot open " + dir + "/none.safetensors: No such file or directory");
}

TEST(SafetensorsFile, OurFileReadsBackInPythonExactly) {
  const std::string dir = FreshDir("ours");
  const std::string w = Floats({1.5f, -0.25f, 3.0f, 0.0f});
  const std::string bf16("\x80\x3f\x00\x40\x40\x40", 6);  // 1, 2, 3
  std::string ids;
  for (int32_t v : {-2, 0, 7}) AppendLittleEndian(&ids, static_cast<uint32_t>(v), 4);
  const std::vector<TensorToWrite> tensors = {
      {"model.layers.0.self_attn.q_proj.weight", SafetensorsDtype::kF32, {2, 2}, Bytes(w)},
      {"model.norm.weight", SafetensorsDtype::kBF16, {3}, Bytes(bf16)},
      {"token_ids", SafetensorsDtype::kI32, {3}, Bytes(ids)},
  };
  const std::string path = dir + "/ours.safetensors";
  const std::vector<std::pair<std::string, std::string>> metadata = {{"format", "pt"}, {"writer", "pipecoord"}};
  const Status st = WriteSafetensorsFile(path, tensors, metadata);
  ASSERT_TRUE(st.ok()) << st.message();

  int status = 0;
  const std::string out =
      testing::RunCommand("/usr/bin/python3 data/testdata/read_safetensors.py " + path + " 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_EQ(out,
            "model.layers.0.self_attn.q_proj.weight F32 [2, 2] 0x1.8000000000000p+0 -0x1.0000000000000p-2 "
            "0x1.8000000000000p+1 0x0.0p+0\n"
            "model.norm.weight BF16 [3] 0x1.0000000000000p+0 0x1.0000000000000p+1 0x1.8000000000000p+1\n"
            "token_ids I32 [3] -2 0 7\n"
            "__metadata__ format=pt writer=pipecoord\n");

  // The official safetensors package reads the same values (the project's Python, tests/python.sh).
  const char* venv = std::getenv("PIPECOORD_VENV");
  const std::string python = std::string(venv != nullptr ? venv : "/var/cache/pipecoord/venv") + "/bin/python";
  int official_status = 0;
  const std::string official =
      testing::RunCommand(python + " data/testdata/read_safetensors_official.py " + path + " 2>&1", &official_status);
  ASSERT_EQ(official_status, 0) << official;
  EXPECT_EQ(official, out);

  // And ours reads it back, byte for byte.
  auto back = SafetensorsFile::Open(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  for (const TensorToWrite& t : tensors) {
    auto view = back->Tensor(t.name);
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(view->bytes.data()), view->bytes.size()),
              std::string(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size()));
  }
}

TEST(SafetensorsFile, AWriteThatCannotHappenNamesThePath) {
  const std::string dir = FreshDir("unwritable");
  const std::string four = Floats({1});
  const std::vector<TensorToWrite> t = {{"w", SafetensorsDtype::kF32, {1}, Bytes(four)}};
  EXPECT_EQ(WriteSafetensorsFile(dir + "/missing/x.safetensors", t).message(),
            "cannot create " + dir + "/missing/x.safetensors.tmp: No such file or directory");
  const std::vector<TensorToWrite> bad = {{"w", SafetensorsDtype::kF32, {2}, Bytes(four)}};
  EXPECT_EQ(WriteSafetensorsFile(dir + "/x.safetensors", bad).message(),
            dir + "/x.safetensors: tensor \"w\": 4 bytes given, F32 [2] takes 8");
}

// Two shards and an index, as Hugging Face lays out a large model.
class Sharded : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    a_ = Floats({1, 2});
    b_ = Floats({3, 4, 5});
    Write("model-00001-of-00002.safetensors", {{"model.embed_tokens.weight", SafetensorsDtype::kF32, {2}, Bytes(a_)}});
    Write("model-00002-of-00002.safetensors", {{"lm_head.weight", SafetensorsDtype::kF32, {3}, Bytes(b_)}});
    index_.weight_map = {{"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
                         {"lm_head.weight", "model-00002-of-00002.safetensors"}};
    index_.total_size = 20;
  }
  void Write(const std::string& name, std::vector<TensorToWrite> tensors) {
    ASSERT_TRUE(WriteSafetensorsFile(dir_ + "/" + name, tensors).ok());
  }
  void WriteIndex() { WriteBytes(dir_ + "/model.safetensors.index.json", ShardIndexJson(index_)); }
  std::string OpenError() {
    auto c = SafetensorsCheckpoint::Open(dir_);
    return c.ok() ? "opened" : c.status().message();
  }

  std::string dir_, a_, b_;
  ShardIndex index_;
};

TEST_F(Sharded, OpensAFolderByItsIndexAndFindsEachTensorInItsShard) {
  WriteIndex();
  EXPECT_EQ(ReadBytes(dir_ + "/model.safetensors.index.json"),
            "{\n  \"metadata\": {\"total_size\": 20},\n  \"weight_map\": {\n"
            "    \"lm_head.weight\": \"model-00002-of-00002.safetensors\",\n"
            "    \"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\"\n  }\n}\n");
  auto ckpt = SafetensorsCheckpoint::Open(dir_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  EXPECT_EQ(ckpt->path(), dir_ + "/model.safetensors.index.json");
  EXPECT_EQ(ckpt->files().size(), 2u);
  EXPECT_EQ(ckpt->TensorNames(), (std::vector<std::string>{"lm_head.weight", "model.embed_tokens.weight"}));
  auto head = ckpt->Tensor("lm_head.weight");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(AsFloats(*head), (std::vector<float>{3, 4, 5}));
  auto embed = ckpt->Tensor("model.embed_tokens.weight");
  ASSERT_TRUE(embed.ok());
  EXPECT_EQ(AsFloats(*embed), (std::vector<float>{1, 2}));
  EXPECT_EQ(ckpt->Tensor("x").status().message(), dir_ + "/model.safetensors.index.json has no tensor \"x\"");
  // The index file itself opens the same checkpoint; so does one shard alone, as a file.
  EXPECT_TRUE(SafetensorsCheckpoint::Open(dir_ + "/model.safetensors.index.json").ok());
  auto one = SafetensorsCheckpoint::Open(dir_ + "/model-00002-of-00002.safetensors");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->TensorNames(), (std::vector<std::string>{"lm_head.weight"}));
}

TEST_F(Sharded, RefusesAnIndexThatDisagreesWithItsShards) {
  index_.weight_map[1].second = "model-00001-of-00002.safetensors";
  WriteIndex();
  const std::string index = dir_ + "/model.safetensors.index.json";
  EXPECT_EQ(OpenError(), index + ": weight_map puts tensor \"lm_head.weight\" in model-00001-of-00002.safetensors, which "
                                 "has no such tensor");
  index_.weight_map = {{"model.embed_tokens.weight", "model-00001-of-00002.safetensors"}};
  Write("model-00001-of-00002.safetensors", {{"model.embed_tokens.weight", SafetensorsDtype::kF32, {2}, Bytes(a_)},
                                             {"stale", SafetensorsDtype::kF32, {3}, Bytes(b_)}});
  WriteIndex();
  EXPECT_EQ(OpenError(), index + ": shard model-00001-of-00002.safetensors holds tensor \"stale\", which weight_map does "
                                 "not list");
  index_.weight_map = {{"model.embed_tokens.weight", "model-00003-of-00002.safetensors"}};
  WriteIndex();
  EXPECT_EQ(OpenError(), index + ": shard \"model-00003-of-00002.safetensors\": cannot open " + dir_ +
                             "/model-00003-of-00002.safetensors: No such file or directory");
  index_.weight_map = {{"model.embed_tokens.weight", "../model.safetensors"}};
  WriteIndex();
  EXPECT_EQ(OpenError(), index + ": weight_map: \"model.embed_tokens.weight\": shard \"../model.safetensors\" is not a "
                                 "file name in the index's folder");
  WriteBytes(index, R"({"weight_map": {}})");
  EXPECT_EQ(OpenError(), index + ": weight_map: lists no tensor");
  WriteBytes(index, R"({"metadata": {"total_size": 20}})");
  EXPECT_EQ(OpenError(), index + ": weight_map: required (tensor name -> shard file)");
  WriteBytes(index, R"({"weight_map": {"a": 1}})");
  EXPECT_EQ(OpenError(), index + ": weight_map: \"a\": expected a shard file name, got 1");
  WriteBytes(index, R"({"weight_map": {"a": "x"}, "extra": 1})");
  EXPECT_EQ(OpenError(), index + ": unknown key \"extra\" (known: metadata, weight_map)");
}

TEST_F(Sharded, AFolderMustHoldOneCheckpoint) {
  EXPECT_EQ(OpenError(), dir_ + ": holds neither model.safetensors nor model.safetensors.index.json");
  WriteIndex();
  Write("model.safetensors", {{"w", SafetensorsDtype::kF32, {2}, Bytes(a_)}});
  EXPECT_EQ(OpenError(), dir_ + ": holds both model.safetensors and model.safetensors.index.json; keep one");
}

}  // namespace
}  // namespace pipecoord::data
