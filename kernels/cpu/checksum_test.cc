#include "kernels/cpu/checksum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/cpu/rng.h"

namespace pipecoord::kernels::cpu {
namespace {

std::vector<float> Buffer(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  Rng(71).FillUniform(v.data(), n, -1, 1);
  return v;
}

TEST(ChecksumTest, HashIsDeterministicAndPinned) {
  const std::vector<float> v = Buffer(1000);
  EXPECT_EQ(HashFloats(v.data(), 1000), HashFloats(v.data(), 1000));
  EXPECT_EQ(HashFloats(v.data(), 0), 0u);
  // The definition is part of the contract (a GPU twin must reproduce it): pin one value.
  const float one = 1.0f;  // bits 0x3F800000
  EXPECT_EQ(HashFloats(&one, 1), Mix64(0x3F800000ULL + 0x9E3779B97F4A7C15ULL));
}

TEST(ChecksumTest, EveryOneUlpFlipChangesTheHash) {
  std::vector<float> v = Buffer(777);
  const uint64_t base = HashFloats(v.data(), 777);
  const double base_sum = OrderedSum(v.data(), 777);
  for (size_t i = 0; i < v.size(); ++i) {
    const float keep = v[i];
    v[i] = std::nextafter(keep, 2.0f);
    EXPECT_NE(HashFloats(v.data(), 777), base) << i;
    EXPECT_NE(OrderedSum(v.data(), 777), base_sum) << i;
    v[i] = keep;
  }
  EXPECT_EQ(HashFloats(v.data(), 777), base);
  v[5] = -0.0f;
  const uint64_t neg = HashFloats(v.data(), 777);
  v[5] = 0.0f;
  EXPECT_NE(HashFloats(v.data(), 777), neg);  // bit patterns, not values
}

TEST(ChecksumTest, HashSeesPositions) {
  std::vector<float> v = {1.0f, 2.0f, 3.0f};
  const uint64_t a = HashFloats(v.data(), 3);
  std::swap(v[0], v[2]);
  EXPECT_NE(HashFloats(v.data(), 3), a);
}

TEST(ChecksumTest, OrderedSumFollowsItsDocumentedOrder) {
  const std::vector<float> v = Buffer(1000);  // blocks of 256, 256, 256, 232
  double blocks[4] = {0, 0, 0, 0};
  for (int i = 0; i < 1000; ++i) blocks[i / 256] += static_cast<double>(v[i]);
  EXPECT_EQ(OrderedSum(v.data(), 1000), (blocks[0] + blocks[1]) + (blocks[2] + blocks[3]));
  std::vector<float> five(5 * 256, 0.5f);  // five blocks: ((b0+b1)+(b2+b3))+b4
  EXPECT_EQ(OrderedSum(five.data(), 5 * 256), 640.0);
  EXPECT_EQ(OrderedSum(v.data(), 0), 0.0);
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
