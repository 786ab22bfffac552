#include "kernels/cpu/checksum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/cpu/known_answers_for_tests.h"
#include "kernels/cpu/rng.h"

namespace pipecoord::kernels::cpu {
namespace {

std::vector<float> Buffer(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  Rng(71).FillUniform(v.data(), n, -1, 1);
  return v;
}

// The definition is part of the contract (a GPU twin must reproduce it), so the values are
// pinned to constants computed independently by known_answers.py.
TEST(ChecksumTest, MatchesIndependentPythonReference) {
  const std::vector<float> v = Buffer(1000);
  EXPECT_EQ(HashFloats(v.data(), 1000), known_answers::kHashOfBuffer71x1000);
  const double sum = OrderedSum(v.data(), 1000);
  uint64_t sum_bits;
  std::memcpy(&sum_bits, &sum, sizeof sum_bits);
  EXPECT_EQ(sum_bits, known_answers::kOrderedSumOfBuffer71x1000Bits);
  EXPECT_EQ(HashFloats(v.data(), 0), 0u);
  const float one = 1.0f;
  EXPECT_EQ(HashFloats(&one, 1), known_answers::kHashOfOne);
  const float one_two_three[] = {1.0f, 2.0f, 3.0f};
  EXPECT_EQ(HashFloats(one_two_three, 3), known_answers::kHashOfOneTwoThree);
  const float negative_zero = -0.0f;
  EXPECT_EQ(HashFloats(&negative_zero, 1), known_answers::kHashOfNegativeZero);
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
