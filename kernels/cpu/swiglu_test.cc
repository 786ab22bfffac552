#include "kernels/cpu/swiglu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/gradient_check.h"

namespace pipecoord::kernels::cpu {
namespace {

using testing::Inner;
using testing::NumericGradient;
using testing::RandomVector;
using testing::RelativeError;
using testing::ReportError;

TEST(SwiGluTest, ForwardValues) {
  const std::vector<double> gate = {0.0, 2.0, -1.0}, up = {5.0, 1.5, 2.0};
  std::vector<double> z(3);
  SwiGluForward(gate.data(), up.data(), z.data(), 3);
  EXPECT_EQ(z[0], 0.0);
  EXPECT_DOUBLE_EQ(z[1], 2.0 / (1.0 + std::exp(-2.0)) * 1.5);
  EXPECT_DOUBLE_EQ(z[2], -1.0 / (1.0 + std::exp(1.0)) * 2.0);
}

TEST(SwiGluTest, BackwardMatchesFiniteDifferences) {
  const int64_t n = 40;
  std::vector<double> gate = RandomVector(n, 41), up = RandomVector(n, 42);
  for (double& g : gate) g *= 4;  // reach both tails of the sigmoid
  const std::vector<double> r = RandomVector(n, 43);
  std::vector<double> z(n);
  auto objective = [&] {
    SwiGluForward(gate.data(), up.data(), z.data(), n);
    return Inner(z, r);
  };
  std::vector<double> dgate(n), dup(n);
  SwiGluBackward(r.data(), gate.data(), up.data(), dgate.data(), dup.data(), n);
  const double eg = RelativeError(dgate, NumericGradient(objective, &gate, 1e-6));
  const double eu = RelativeError(dup, NumericGradient(objective, &up, 1e-6));
  ReportError("swiglu dgate (B)", eg);
  ReportError("swiglu dup (B)", eu);
  EXPECT_LT(eg, 1e-8);
  EXPECT_LT(eu, 1e-8);
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
