#include "kernels/cpu/rms_norm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/cpu/gradient_check.h"
#include "kernels/cpu/rms_norm_reference.h"

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

// The fp32 path (vector code, lane_sum.h's order) against the double reference on the same fp32
// inputs, per element, u = 2^-24: rstd is the double value rounded (u); y = x rstd g from the
// rounded rstd, rounded again (2u); dx = r g dy - c x, c = r^3 mean(g dy x), with r carrying u
// and c 3u, rounded once: within 4u (|r g dy| + |c x|) + u |dx|; dg = sum_t dy x r within
// u sum_t |dy x r| + u |dg|. Double's own rounding (2^-52 per operation, the sums reordered)
// is far below these; the test allows twice each bound. h 259 runs the vector loops' tails.
TEST(RmsNormTest, FloatPathWithinBoundOfDoubleReference) {
  const int64_t n = 7, h = 259;
  const double u = std::ldexp(1.0, -24);
  std::vector<double> x = RandomVector(n * h, 21), g = RandomVector(h, 22),
                      dy = RandomVector(n * h, 23);
  std::vector<float> xf(x.begin(), x.end()), gf(g.begin(), g.end()), dyf(dy.begin(), dy.end());
  for (size_t i = 0; i < x.size(); ++i) x[i] = xf[i], dy[i] = dyf[i];
  for (int64_t i = 0; i < h; ++i) g[i] = gf[i];
  std::vector<float> yf(n * h), rf(n), dxf(n * h), dgf(h, 0.5f);
  std::vector<double> yd(n * h), rd(n), dxd(n * h), dgd(h, 0.5);
  RmsNormForward(xf.data(), gf.data(), yf.data(), rf.data(), n, h, 1e-5);
  RmsNormBackwardInput(dyf.data(), xf.data(), gf.data(), rf.data(), dxf.data(), n, h, false);
  RmsNormBackwardWeight(dyf.data(), xf.data(), rf.data(), dgf.data(), n, h);
  RmsNormForwardReference(x.data(), g.data(), yd.data(), rd.data(), n, h, 1e-5);
  RmsNormBackwardInputReference(dy.data(), x.data(), g.data(), rd.data(), dxd.data(), n, h, false);
  RmsNormBackwardWeightReference(dy.data(), x.data(), rd.data(), dgd.data(), n, h);
  double worst = 0;
  auto expect = [&](double got, double want, double bound, const char* what, int64_t at) {
    ASSERT_LE(std::fabs(got - want), 2 * bound) << what << " element " << at;
    worst = std::max(worst, std::fabs(got - want) / (2 * bound));
  };
  std::vector<double> dg_terms(h, 0.0);
  for (int64_t t = 0; t < n; ++t) {
    expect(rf[t], rd[t], u * rd[t], "rstd", t);
    double dot = 0;
    for (int64_t i = 0; i < h; ++i) dot += g[i] * dy[t * h + i] * x[t * h + i];
    const double r = rd[t], c = r * r * r * dot / h;
    for (int64_t i = 0; i < h; ++i) {
      const int64_t k = t * h + i;
      expect(yf[k], yd[k], 2 * u * std::fabs(yd[k]), "y", k);
      expect(dxf[k], dxd[k],
             4 * u * (std::fabs(r * g[i] * dy[k]) + std::fabs(c * x[k])) + u * std::fabs(dxd[k]),
             "dx", k);
      dg_terms[i] += std::fabs(dy[k] * x[k] * r);
    }
  }
  for (int64_t i = 0; i < h; ++i) {
    expect(dgf[i], dgd[i], u * dg_terms[i] + u * std::fabs(dgd[i]), "dg", i);
  }
  std::printf("rmsnorm fp32 vs double reference: worst %.3f of the bound\n", worst);
}

// The same bits wherever the rows sit in memory.
TEST(RmsNormTest, FloatPathSameBitsAtAnyAlignment) {
  const int64_t n = 3, h = 100;
  const std::vector<double> src = RandomVector(2 * n * h + h, 31);
  std::vector<float> want;
  for (int64_t shift : {0, 1, 3, 16}) {
    std::vector<float> buf(2 * n * h + h + shift), y(n * h + shift), rstd(n + shift),
        dx(n * h + shift), dg(h + shift, 0.0f);
    for (size_t i = 0; i < src.size(); ++i) buf[shift + i] = static_cast<float>(src[i]);
    const float* x = buf.data() + shift;
    const float* dy = x + n * h;
    const float* g = dy + n * h;
    RmsNormForward(x, g, y.data() + shift, rstd.data() + shift, n, h, 1e-5);
    RmsNormBackwardInput(dy, x, g, rstd.data() + shift, dx.data() + shift, n, h, false);
    RmsNormBackwardWeight(dy, x, rstd.data() + shift, dg.data() + shift, n, h);
    std::vector<float> got(y.begin() + shift, y.end());
    got.insert(got.end(), dx.begin() + shift, dx.end());
    got.insert(got.end(), dg.begin() + shift, dg.end());
    got.insert(got.end(), rstd.begin() + shift, rstd.end());
    if (shift == 0) {
      want = got;
      continue;
    }
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
          << shift << " " << i;
    }
  }
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
