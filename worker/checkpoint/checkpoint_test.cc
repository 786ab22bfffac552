#include "worker/checkpoint/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace pipecoord::worker {
namespace {

using ::testing::HasSubstr;

struct Buffers {
  std::vector<float> a{1.5f, -2.f, 0.f, 3.25f}, b{7.f};
  std::vector<StateTensor> Views() { return {{"stage0/w/value", a}, {"stage0/w/adam_m", b}}; }
};

// The format before safetensors, written here from its documented layout (checkpoint.h).
std::string LegacyBytes(uint64_t step, uint64_t opt_steps, const std::vector<StateTensor>& tensors) {
  std::string b = "PCCKPT01";
  auto put = [&](auto v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(step);
  put(opt_steps);
  put(static_cast<uint32_t>(tensors.size()));
  for (const StateTensor& t : tensors) {
    put(static_cast<uint32_t>(t.name.size()));
    b += t.name;
    put(static_cast<uint64_t>(t.data.size()));
    b.append(reinterpret_cast<const char*>(t.data.data()), t.data.size_bytes());
  }
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : b) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  put(h);
  return b;
}

TEST(CheckpointTest, EncodingIsSafetensorsWithTheDocumentedMetadata) {
  Buffers x;
  std::vector<StateTensor> views = x.Views();
  views[0].shape = {2, 2};
  const std::string bytes = EncodeCheckpoint({3, 4}, views);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const std::string header = bytes.substr(8, n);
  // The data buffer: stage0/w/adam_m (4 bytes) then stage0/w/value (16), by name at equal size.
  EXPECT_EQ(bytes.size(), 8 + n + 4 + 16);
  // FNV-1a of those 20 bytes, computed independently of the code under test.
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 8 + n; i < bytes.size(); ++i) {
    h ^= static_cast<unsigned char>(bytes[i]);
    h *= 0x100000001b3ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  EXPECT_THAT(header, HasSubstr("\"__metadata__\":{\"format\":\"pipecoord-rank-checkpoint\",\"version\":\"1\",\"step\":"
                                "\"3\",\"optimizer_steps\":\"4\",\"fnv1a64\":\"" + std::string(hex) + "\"}"));
  EXPECT_THAT(header, HasSubstr("\"stage0/w/value\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[4,20]}"));
  EXPECT_THAT(header, HasSubstr("\"stage0/w/adam_m\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}"));
}

TEST(CheckpointTest, TheFormatBeforeSafetensorsIsStillRead) {
  Buffers x, y;
  y.a.assign(4, 0.f);
  y.b.assign(1, 0.f);
  auto info = DecodeCheckpointInto(LegacyBytes(7, 8, x.Views()), y.Views());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->step, 7);
  EXPECT_EQ(info->optimizer_steps, 8);
  EXPECT_EQ(y.a, x.a);
  EXPECT_EQ(y.b, x.b);
  std::string flipped = LegacyBytes(7, 8, x.Views());
  flipped[40] ^= 1;
  EXPECT_EQ(DecodeCheckpointInto(flipped, y.Views()).status().message(), "checksum mismatch: the file is truncated or corrupt");
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
  flipped[bytes.size() - 2] ^= 1;  // a bit of the data buffer
  EXPECT_EQ(DecodeCheckpointInto(flipped, y.Views()).status().message(), "checksum mismatch: the file is corrupt");
  EXPECT_THAT(DecodeCheckpointInto(bytes.substr(0, bytes.size() - 3), y.Views()).status().message(),
              HasSubstr("not a pipecoord checkpoint: checkpoint: "));
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
  EXPECT_EQ(names, (std::vector<std::string>{"step-3.safetensors", "step-4.safetensors"}));  // no .tmp left behind
  std::ifstream file(dir + "/job-000001/rank-3/step-4.safetensors", std::ios::binary);
  const std::string on_disk((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(on_disk, EncodeCheckpoint({4, 5}, x.Views()));  // the file holds exactly the encoding
  Buffers y;
  auto info = ReadCheckpointFile(dir, "job-000001", 3, 3, y.Views());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(y.b[0], 3.f);
  EXPECT_EQ(info->optimizer_steps, 4);
  auto missing = ReadCheckpointFile(dir, "job-000001", 3, 1, y.Views());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(dir + "/job-000001/rank-3/step-1.safetensors: not found"));
  // A file renamed to another step is caught by its header.
  std::filesystem::copy_file(dir + "/job-000001/rank-3/step-4.safetensors", dir + "/job-000001/rank-3/step-9.safetensors");
  EXPECT_THAT(ReadCheckpointFile(dir, "job-000001", 3, 9, y.Views()).status().message(), HasSubstr("holds step 4, expected 9"));
  // An older worker's step-N.ckpt is found and read where no safetensors file exists, and is
  // pruned with the rest.
  Buffers old;
  old.b[0] = 10.f;
  {
    std::ofstream legacy(dir + "/job-000001/rank-3/step-10.ckpt", std::ios::binary);
    legacy << LegacyBytes(10, 11, old.Views());
  }
  info = ReadCheckpointFile(dir, "job-000001", 3, 10, y.Views());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(y.b[0], 10.f);
  ASSERT_TRUE(WriteCheckpointFile(dir, "job-000001", 3, {11, 12}, x.Views(), 1).ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/job-000001/rank-3/step-10.ckpt"));
  EXPECT_EQ(WriteCheckpointFile("/proc/no-such-dir", "j", 0, {0, 0}, x.Views()).code(), Code::kUnavailable);
}

}  // namespace
}  // namespace pipecoord::worker
