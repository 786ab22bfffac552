#include "kernels/cpu/rms_norm.h"

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

TEST(RmsNormTest, ForwardNormalisesRows) {
  // Row [3, 4]: mean square 12.5 -> rstd = 1/sqrt(12.5 + eps).
  const std::vector<double> x = {3, 4}, g = {1, 2};
  std::vector<double> y(2), rstd(1);
  RmsNormForward(x.data(), g.data(), y.data(), rstd.data(), 1, 2, 0.0);
  EXPECT_DOUBLE_EQ(rstd[0], 1.0 / std::sqrt(12.5));
  EXPECT_DOUBLE_EQ(y[0], 3 * rstd[0]);
  EXPECT_DOUBLE_EQ(y[1], 8 * rstd[0]);
}

TEST(RmsNormTest, BackwardPartsMatchFiniteDifferences) {
  const int64_t n = 4, h = 6;
  std::vector<double> x = RandomVector(n * h, 11), g = RandomVector(h, 12);
  const std::vector<double> r = RandomVector(n * h, 13);
  std::vector<double> y(n * h), rstd(n);
  auto objective = [&] {
    RmsNormForward(x.data(), g.data(), y.data(), rstd.data(), n, h, 1e-5);
    return Inner(y, r);
  };
  objective();
  std::vector<double> dx(n * h), dg(h, 0.0);
  RmsNormBackwardInput(r.data(), x.data(), g.data(), rstd.data(), dx.data(), n, h, false);
  RmsNormBackwardWeight(r.data(), x.data(), rstd.data(), dg.data(), n, h);
  const double ex = RelativeError(dx, NumericGradient(objective, &x, 1e-6));
  const double eg = RelativeError(dg, NumericGradient(objective, &g, 1e-6));
  ReportError("rmsnorm dx (B)", ex);
  ReportError("rmsnorm dgain (W)", eg);
  EXPECT_LT(ex, 1e-7);
  EXPECT_LT(eg, 1e-7);
}

TEST(RmsNormTest, AccumulateAddsToInputGradient) {
  const int64_t n = 2, h = 3;
  const std::vector<float> x = {1, -2, 3, 0.5f, 0.25f, -1}, g = {1, 1, 2}, dy = {1, 0, -1, 2, 1, 0};
  std::vector<float> y(6), rstd(2), fresh(6), acc(6, 1.0f);
  RmsNormForward(x.data(), g.data(), y.data(), rstd.data(), n, h, 1e-5);
  RmsNormBackwardInput(dy.data(), x.data(), g.data(), rstd.data(), fresh.data(), n, h, false);
  RmsNormBackwardInput(dy.data(), x.data(), g.data(), rstd.data(), acc.data(), n, h, true);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(acc[i], 1.0f + fresh[i]) << i;
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
