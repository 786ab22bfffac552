#include "worker/checkpoint/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace pipecoord::worker {
namespace {

using ::testing::HasSubstr;

struct Buffers {
  std::vector<float> a{1.5f, -2.f, 0.f, 3.25f}, b{7.f};
  std::vector<StateTensor> Views() { return {{"stage0/w/value", a}, {"stage0/w/adam_m", b}}; }
};

TEST(CheckpointTest, EncodingIsTheDocumentedLayout) {
  Buffers x;
  const std::string bytes = EncodeCheckpoint({3, 4}, x.Views());
  // magic 8 + step 8 + opt steps 8 + count 4 + (4 + 14 + 8 + 16) + (4 + 15 + 8 + 4) + hash 8
  EXPECT_EQ(bytes.size(), 8u + 8 + 8 + 4 + (4 + 14 + 8 + 16) + (4 + 15 + 8 + 4) + 8);
  EXPECT_EQ(bytes.substr(0, 8), "PCCKPT01");
}

TEST(CheckpointTest, RoundTripRestoresEveryTensorInAnyOrder) {
  Buffers x;
  const std::string bytes = EncodeCheckpoint({12, 13}, x.Views());
  Buffers y;
  y.a.assign(4, 0.f);
  y.b.assign(1, 0.f);
  std::vector<StateTensor> reversed = y.Views();
  std::swap(reversed[0], reversed[1]);
  auto info = DecodeCheckpointInto(bytes, reversed);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->step, 12);
  EXPECT_EQ(info->optimizer_steps, 13);
  EXPECT_EQ(y.a, x.a);
  EXPECT_EQ(y.b, x.b);
}

TEST(CheckpointTest, CorruptionTruncationAndMismatchesAreRefused) {
  Buffers x;
  const std::string bytes = EncodeCheckpoint({1, 1}, x.Views());
  Buffers y;
  std::string flipped = bytes;
  flipped[40] ^= 1;
  EXPECT_EQ(DecodeCheckpointInto(flipped, y.Views()).status().message(), "checksum mismatch: the file is truncated or corrupt");
  EXPECT_EQ(DecodeCheckpointInto(bytes.substr(0, bytes.size() - 3), y.Views()).status().message(),
            "checksum mismatch: the file is truncated or corrupt");
  EXPECT_THAT(DecodeCheckpointInto("hello", y.Views()).status().message(), HasSubstr("not a pipecoord checkpoint"));
  // Another partition: a tensor of a different size, a different name, a different count.
  y.a.resize(5);
  EXPECT_EQ(DecodeCheckpointInto(bytes, y.Views()).status().message(),
            "tensor \"stage0/w/value\": has 4 elements, this rank's has 5");
  std::vector<StateTensor> renamed = {{"stage1/w/value", x.a}, {"stage0/w/adam_m", x.b}};
  EXPECT_EQ(DecodeCheckpointInto(bytes, renamed).status().message(), "tensor \"stage0/w/value\": not held by this rank");
  std::vector<StateTensor> one = {{"stage0/w/value", x.a}};
  EXPECT_EQ(DecodeCheckpointInto(bytes, one).status().message(), "holds 2 tensors, this rank has 1 (another model or partition?)");
}

TEST(CheckpointTest, FilesAreWrittenAtomicallyAndOnlyTheNewestAreKept) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/ckpt";
  std::filesystem::remove_all(dir);
  Buffers x;
  for (int step = 0; step < 5; ++step) {
    x.b[0] = static_cast<float>(step);
    ASSERT_TRUE(WriteCheckpointFile(dir, "job-000001", 3, {step, step + 1}, x.Views()).ok());
  }
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/job-000001/rank-3")) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"step-3.ckpt", "step-4.ckpt"}));  // no .tmp left behind
  std::ifstream file(dir + "/job-000001/rank-3/step-4.ckpt", std::ios::binary);
  const std::string on_disk((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(on_disk, EncodeCheckpoint({4, 5}, x.Views()));  // the file holds exactly the encoding
  Buffers y;
  auto info = ReadCheckpointFile(dir, "job-000001", 3, 3, y.Views());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(y.b[0], 3.f);
  EXPECT_EQ(info->optimizer_steps, 4);
  auto missing = ReadCheckpointFile(dir, "job-000001", 3, 1, y.Views());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(dir + "/job-000001/rank-3/step-1.ckpt: not found"));
  // A file renamed to another step is caught by its header.
  std::filesystem::copy_file(dir + "/job-000001/rank-3/step-4.ckpt", dir + "/job-000001/rank-3/step-9.ckpt");
  EXPECT_THAT(ReadCheckpointFile(dir, "job-000001", 3, 9, y.Views()).status().message(), HasSubstr("holds step 4, expected 9"));
  EXPECT_EQ(WriteCheckpointFile("/proc/no-such-dir", "j", 0, {0, 0}, x.Views()).code(), Code::kUnavailable);
}

}  // namespace
}  // namespace pipecoord::worker
