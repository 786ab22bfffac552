// The tests' metric itself (no GPU needed): it must catch what a broken kernel produces.
#include "kernels/cuda/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace pipecoord::kernels::cuda {
namespace {

TEST(CompareToCpuTest, IdenticalIsZero) {
  const std::vector<float> v = {1.0f, -2.5f, 0.0f, 3e-8f};
  EXPECT_EQ(CompareToCpu(v, v).error, 0.0);
}

TEST(CompareToCpuTest, RelativeForLargeElementsAbsoluteForTinyOnes) {
  // Element 0: relative 1e-3. Element 1 (tiny against max 100): measured against 1e-6 + 0.1.
  const std::vector<double> cpu = {100.0, 1e-9};
  const std::vector<double> gpu = {100.1, 1e-9 + 0.001};
  const Comparison c = CompareToCpu(gpu, cpu);
  EXPECT_NEAR(c.error, 0.001 / (1e-6 + 0.1), 1e-12);
  EXPECT_EQ(c.worst, 1);
  EXPECT_NE(c.Describe().find("at element 1 of 2"), std::string::npos) << c.Describe();
}

TEST(CompareToCpuTest, NanOrInfinityWhereCpuIsFiniteFailsEveryThreshold) {
  const std::vector<float> cpu = {1.0f, 2.0f, 3.0f};
  const std::vector<float> poisoned = {1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f};
  const Comparison c = CompareToCpu(poisoned, cpu);
  EXPECT_TRUE(std::isinf(c.error));
  EXPECT_EQ(c.worst, 1);
  EXPECT_FALSE(c.error < kBf16Tolerance);
  const std::vector<float> inf = {1.0f, 2.0f, std::numeric_limits<float>::infinity()};
  EXPECT_TRUE(std::isinf(CompareToCpu(inf, cpu).error));
}

TEST(CompareToCpuTest, SizeMismatchFails) {
  const std::vector<float> a = {1.0f, 2.0f};
  const std::vector<float> b = {1.0f};
  const Comparison c = CompareToCpu(a, b);
  EXPECT_TRUE(std::isinf(c.error));
  EXPECT_NE(c.Describe().find("size mismatch"), std::string::npos);
}

TEST(CompareToCpuTest, EmptyIsZero) {
  const std::vector<float> none;
  EXPECT_EQ(CompareToCpu(none, none).error, 0.0);
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
