#include "kernels/cpu/swiglu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/cpu/gradient_check.h"
#include "kernels/cpu/swiglu_reference.h"

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

// The fp32 path (float vector code) against the double reference on the same fp32 inputs, per
// element: exp within 2 ulp (4u relative), then 1 + e, the division and the products add a
// rounding each, so z and dup lie within 8u of the exact value and dgate within 8u of its terms'
// magnitude |dz up sg| (1 + |u (1 - sg)|) (silu' crosses zero near u = -1.28, where a relative
// bound cannot hold). The test allows 16u, plus 2e-38 (1 + |gate|) absolute for gates below
// -87, where the clamped exp gives sigmoid 1.6e-38 instead of a smaller value (|up|, |dz| <= 1).
TEST(SwiGluTest, FloatPathWithinBoundOfDoubleReference) {
  const int64_t n = 4099;  // not a multiple of any vector width: the loops' tails run too
  std::vector<double> gate = RandomVector(n, 51), up = RandomVector(n, 52),
                      dz = RandomVector(n, 53);
  for (int64_t i = 0; i < n; ++i) gate[i] *= (i % 7 == 0) ? 100 : 8;  // the tails of exp
  const double special[] = {0.0, -1.2784645, 87.0, -87.0, 88.5, -88.5, 100.0, -100.0, 1e-8};
  for (int i = 0; i < 9; ++i) gate[i] = special[i];
  std::vector<float> gf(gate.begin(), gate.end()), uf(up.begin(), up.end()),
      df(dz.begin(), dz.end());
  for (int64_t i = 0; i < n; ++i) gate[i] = gf[i], up[i] = uf[i], dz[i] = df[i];  // same inputs
  std::vector<float> z(n), dgate(n), dup(n);
  SwiGluForward(gf.data(), uf.data(), z.data(), n);
  SwiGluBackward(df.data(), gf.data(), uf.data(), dgate.data(), dup.data(), n);
  std::vector<double> zd(n), dgd(n), dud(n);
  SwiGluForwardReference(gate.data(), up.data(), zd.data(), n);
  SwiGluBackwardReference(dz.data(), gate.data(), up.data(), dgd.data(), dud.data(), n);
  const double u = std::ldexp(1.0, -24);
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double sg = 1 / (1 + std::exp(-gate[i]));
    const double dgate_scale = std::fabs(dz[i] * up[i] * sg) * (1 + std::fabs(gate[i] * (1 - sg)));
    const double checks[3][3] = {{z[i], zd[i], std::fabs(zd[i])},
                                 {dup[i], dud[i], std::fabs(dud[i])},
                                 {dgate[i], dgd[i], dgate_scale}};
    const double floor = 2e-38 * (1 + std::fabs(gate[i]));
    for (const auto& c : checks) {
      const double bound = 16 * u * c[2] + floor;
      ASSERT_LE(std::fabs(c[0] - c[1]), bound) << "element " << i << " gate " << gate[i];
      worst = std::max(worst, std::fabs(c[0] - c[1]) / bound);
    }
  }
  std::printf("swiglu fp32 vs double reference: worst %.3f of the bound\n", worst);
}

// The same bits wherever the buffers sit (vector body, peeled head or scalar tail).
TEST(SwiGluTest, FloatPathSameBitsAtAnyAlignment) {
  const int64_t n = 1000;
  std::vector<double> src = RandomVector(3 * n, 61);
  std::vector<float> want_z, want_dg, want_du;
  for (int64_t shift : {0, 1, 3, 16}) {
    std::vector<float> in(3 * n + shift), z(n + shift), dg(n + shift), du(n + shift);
    for (int64_t i = 0; i < 3 * n; ++i) in[shift + i] = static_cast<float>(src[i] * 6);
    const float* gate = in.data() + shift;
    const float* up = gate + n;
    const float* dz = gate + 2 * n;
    SwiGluForward(gate, up, z.data() + shift, n);
    SwiGluBackward(dz, gate, up, dg.data() + shift, du.data() + shift, n);
    std::vector<float> gz(z.begin() + shift, z.end()), gdg(dg.begin() + shift, dg.end()),
        gdu(du.begin() + shift, du.end());
    if (shift == 0) {
      want_z = gz, want_dg = gdg, want_du = gdu;
      continue;
    }
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(gz[i]), std::bit_cast<uint32_t>(want_z[i])) << shift;
      ASSERT_EQ(std::bit_cast<uint32_t>(gdg[i]), std::bit_cast<uint32_t>(want_dg[i])) << shift;
      ASSERT_EQ(std::bit_cast<uint32_t>(gdu[i]), std::bit_cast<uint32_t>(want_du[i])) << shift;
    }
  }
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
