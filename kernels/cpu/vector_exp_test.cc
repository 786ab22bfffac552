#include "kernels/cpu/vector_exp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/cpu/rng.h"

namespace pipecoord::kernels::cpu {
namespace {

// Relative error of VectorExp against libm's exp in long double, over the ranges the callers use
// (SwiGLU: any gate; softmax: max-subtracted scores <= 0) and the clamps' edges.
template <typename T>
double WorstRelativeError(double lo, double hi, int64_t n) {
  std::vector<double> x(n);
  Rng(71).FillUniform(x.data(), n, lo, hi);
  double worst = 0;
  for (double xi : x) {
    const T v = static_cast<T>(xi);
    const long double want = std::exp(static_cast<long double>(v));
    const long double got = VectorExp(v);
    worst = std::max(worst, static_cast<double>(std::fabs(got - want) / want));
  }
  return worst;
}

TEST(VectorExpTest, FloatWithinTwoUlp) {
  const double ulp = std::ldexp(1.0, -23);
  const double worst = std::max(WorstRelativeError<float>(-87, 88, 200000),
                                WorstRelativeError<float>(-1, 1, 200000));
  std::printf("float VectorExp: worst relative error %.3g (%.2f ulp)\n", worst, worst / ulp);
  EXPECT_LE(worst, 2 * ulp);
}

TEST(VectorExpTest, DoubleWithinFourUlp) {
  const double ulp = std::ldexp(1.0, -52);
  const double worst = std::max(WorstRelativeError<double>(-708, 0, 200000),
                                std::max(WorstRelativeError<double>(-1, 1, 200000),
                                         WorstRelativeError<double>(0, 709, 200000)));
  std::printf("double VectorExp: worst relative error %.3g (%.2f ulp)\n", worst, worst / ulp);
  EXPECT_LE(worst, 4 * ulp);
}

TEST(VectorExpTest, ExactAtZeroAndClampedOutsideTheRange) {
  EXPECT_EQ(VectorExp(0.0f), 1.0f);
  EXPECT_EQ(VectorExp(0.0), 1.0);
  EXPECT_EQ(VectorExp(-1000.0f), VectorExp(-87.0f));
  EXPECT_GT(VectorExp(-1000.0f), 0.0f);
  EXPECT_EQ(VectorExp(1000.0f), VectorExp(88.0f));
  EXPECT_EQ(VectorExp(-1e6), VectorExp(-708.0));
  EXPECT_TRUE(std::isnormal(VectorExp(-708.0)));
  EXPECT_TRUE(std::isfinite(VectorExp(1e6)));
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
