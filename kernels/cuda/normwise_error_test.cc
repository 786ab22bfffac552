// The tests' metric must fail on what it is there to catch: unwritten (NaN) elements, wrong
// values, size mismatches; and it measures against the tensor's largest value.
#include "kernels/cuda/normwise_error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace pipecoord::kernels::cuda {
namespace {

TEST(NormwiseErrorTest, IsTheLargestDifferenceOverTheLargestValue) {
  const std::vector<double> cpu = {4.0, -0.001, 2.0};
  const std::vector<float> gpu = {4.0f, 0.001f, 2.0f};
  const NormwiseError e = CompareNormwise(gpu, cpu);
  EXPECT_NEAR(e.error, 0.002 / 4.0, 1e-9);  // not 2.0, as a per-element metric would say
  EXPECT_EQ(e.worst, 1);
  EXPECT_EQ(e.cpu_max, 4.0);
}

TEST(NormwiseErrorTest, IdenticalIsZero) {
  const std::vector<float> v = {1.5f, -2.0f, 0.0f};
  EXPECT_EQ(CompareNormwise(v, v).error, 0.0);
}

TEST(NormwiseErrorTest, NanOrInfinityInTheGpuResultIsInfinite) {
  const std::vector<double> cpu = {1.0, 2.0};
  EXPECT_TRUE(std::isinf(CompareNormwise(std::vector<float>{1.0f, NAN}, cpu).error));
  EXPECT_TRUE(std::isinf(CompareNormwise(std::vector<float>{INFINITY, 2.0f}, cpu).error));
  EXPECT_EQ(CompareNormwise(std::vector<float>{1.0f, NAN}, cpu).worst, 1);
}

TEST(NormwiseErrorTest, SizeMismatchIsInfinite) {
  const NormwiseError e = CompareNormwise(std::vector<float>{1.0f}, std::vector<double>{1.0, 2.0});
  EXPECT_TRUE(std::isinf(e.error));
  EXPECT_NE(e.Describe().find("size mismatch"), std::string::npos);
}

TEST(NormwiseErrorTest, AllZeroReferenceMeasuresAbsoluteDifference) {
  const NormwiseError e =
      CompareNormwise(std::vector<float>{0.0f, 0.5f}, std::vector<double>{0, 0});
  EXPECT_EQ(e.error, 0.5);
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
