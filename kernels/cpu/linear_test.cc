#include "kernels/cpu/linear.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/cpu/gradient_check.h"

namespace pipecoord::kernels::cpu {
namespace {

using testing::Inner;
using testing::NumericGradient;
using testing::RandomVector;
using testing::RelativeError;
using testing::ReportError;

TEST(LinearTest, ForwardMatchesHandComputedProduct) {
  // x [2, 3], w [2, 3]: y = x w^T, small integers so every sum is exact.
  const std::vector<float> x = {1, 2, 3, 4, 5, 6}, w = {1, 0, -1, 2, 1, 0};
  std::vector<float> y(4);
  LinearForward(x.data(), w.data(), y.data(), {2, 3, 2});
  EXPECT_EQ(y, (std::vector<float>{-2, 4, -2, 13}));
}

TEST(LinearTest, ForwardEqualsOneInOrderDoubleDotProductPerOutput) {
  const LinearDims d{7, 33, 19};
  std::vector<float> x(d.n * d.in), w(d.out * d.in), y(d.n * d.out);
  Rng(4).FillUniform(x.data(), d.n * d.in, -1, 1);
  Rng(5).FillUniform(w.data(), d.out * d.in, -1, 1);
  LinearForward(x.data(), w.data(), y.data(), d);
  for (int64_t t = 0; t < d.n; ++t) {
    for (int64_t o = 0; o < d.out; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < d.in; ++i) {
        acc += static_cast<double>(x[t * d.in + i]) * w[o * d.in + i];
      }
      ASSERT_EQ(y[t * d.out + o], static_cast<float>(acc)) << t << "," << o;
    }
  }
}

TEST(LinearTest, BackwardPartsMatchFiniteDifferences) {
  const LinearDims d{5, 7, 4};
  std::vector<double> x = RandomVector(d.n * d.in, 1), w = RandomVector(d.out * d.in, 2);
  const std::vector<double> r = RandomVector(d.n * d.out, 3);
  std::vector<double> y(r.size());
  auto objective = [&] {
    LinearForward(x.data(), w.data(), y.data(), d);
    return Inner(y, r);
  };
  std::vector<double> dx(x.size()), dw(w.size(), 0.0);
  LinearBackwardInput(r.data(), w.data(), dx.data(), d, /*accumulate=*/false);
  LinearBackwardWeight(r.data(), x.data(), dw.data(), d);
  const double ex = RelativeError(dx, NumericGradient(objective, &x, 1e-6));
  const double ew = RelativeError(dw, NumericGradient(objective, &w, 1e-6));
  ReportError("linear dX (B)", ex);
  ReportError("linear dW (W)", ew);
  EXPECT_LT(ex, 1e-8);
  EXPECT_LT(ew, 1e-8);
}

TEST(LinearTest, InputGradientAccumulatesOnRequestAndWeightGradientAlways) {
  const LinearDims d{3, 4, 2};
  std::vector<float> x(12), w(8), dy(6);
  for (int i = 0; i < 12; ++i) x[i] = static_cast<float>(i % 5) - 2;
  for (int i = 0; i < 8; ++i) w[i] = static_cast<float>(i % 3) - 1;
  for (int i = 0; i < 6; ++i) dy[i] = static_cast<float>(i) - 2;
  std::vector<float> once(12), twice(12, 0.0f);
  LinearBackwardInput(dy.data(), w.data(), once.data(), d, false);
  LinearBackwardInput(dy.data(), w.data(), twice.data(), d, true);
  LinearBackwardInput(dy.data(), w.data(), twice.data(), d, true);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(twice[i], 2 * once[i]) << i;
  std::vector<float> dw1(8, 0.0f), dw2(8, 0.0f);
  LinearBackwardWeight(dy.data(), x.data(), dw1.data(), d);
  LinearBackwardWeight(dy.data(), x.data(), dw2.data(), d);
  LinearBackwardWeight(dy.data(), x.data(), dw2.data(), d);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(dw2[i], 2 * dw1[i]) << i;
  // Overwrite mode ignores what was in dx.
  std::vector<float> garbage(12, 99.0f);
  LinearBackwardInput(dy.data(), w.data(), garbage.data(), d, false);
  EXPECT_EQ(garbage, once);
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
