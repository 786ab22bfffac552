#include "kernels/cpu/linear.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cpu/gradient_check.h"
#include "kernels/cpu/linear_reference.h"
#include "kernels/cpu/rng.h"

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

TEST(LinearTest, ReferenceForwardEqualsOneInOrderDoubleDotProductPerOutput) {
  const LinearDims d{7, 33, 19};
  std::vector<float> x(d.n * d.in), w(d.out * d.in), y(d.n * d.out);
  Rng(4).FillUniform(x.data(), d.n * d.in, -1, 1);
  Rng(5).FillUniform(w.data(), d.out * d.in, -1, 1);
  LinearForwardReference(x.data(), w.data(), y.data(), d);
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

// The fp32 GEMMs against the double-accumulating reference, element by element, within the
// textbook bound of a K-term fp32 sum of products (Higham, Accuracy and Stability of Numerical
// Algorithms, 2nd ed., eq. 3.5): |computed - exact| <= gamma_K sum_k |a_k b_k|, gamma_K =
// K u / (1 - K u), u = 2^-24; plus, for accumulating calls, the rounding of the final addition
// (u |result|) and the reference's own rounding to float (u |result|). `abs` holds each
// element's sum_k |a_k b_k| (plus |previous value| when accumulating), computed in double.
void ExpectWithinFp32SumBound(const std::vector<float>& got, const std::vector<float>& want,
                              const std::vector<double>& abs, int64_t k, const char* what) {
  const double u = std::ldexp(1.0, -24);
  const double gamma = k * u / (1 - k * u);
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = gamma * abs[i] + 2 * u * std::abs(static_cast<double>(want[i]));
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    ASSERT_LE(err, bound) << what << " element " << i;
    if (abs[i] > 0) worst = std::max(worst, err / abs[i]);
  }
  std::printf("%s: worst |error| / sum|a b| = %.3g (bound gamma_K = %.3g, K = %lld)\n", what, worst,
              gamma, static_cast<long long>(k));
}

// Sizes past OpenBLAS's blocking and register tiles in every dimension, and ragged edges.
constexpr LinearDims kBig{67, 300, 129};

TEST(LinearTest, ForwardWithinTheFp32BoundOfTheReference) {
  const LinearDims d = kBig;
  std::vector<float> x(d.n * d.in), w(d.out * d.in), y(d.n * d.out), want(d.n * d.out);
  Rng(4).FillUniform(x.data(), d.n * d.in, -1, 1);
  Rng(5).FillUniform(w.data(), d.out * d.in, -1, 1);
  LinearForward(x.data(), w.data(), y.data(), d);
  LinearForwardReference(x.data(), w.data(), want.data(), d);
  std::vector<double> abs(y.size(), 0.0);
  for (int64_t t = 0; t < d.n; ++t) {
    for (int64_t o = 0; o < d.out; ++o) {
      for (int64_t i = 0; i < d.in; ++i) abs[t * d.out + o] += std::abs(double{x[t * d.in + i]} * w[o * d.in + i]);
    }
  }
  ExpectWithinFp32SumBound(y, want, abs, d.in, "F");
}

TEST(LinearTest, BackwardPartsWithinTheFp32BoundOfTheReference) {
  const LinearDims d = kBig;
  std::vector<float> x(d.n * d.in), w(d.out * d.in), dy(d.n * d.out);
  Rng(6).FillUniform(x.data(), d.n * d.in, -1, 1);
  Rng(7).FillUniform(w.data(), d.out * d.in, -1, 1);
  Rng(8).FillUniform(dy.data(), d.n * d.out, -1, 1);
  // B, accumulating onto a nonzero dx.
  std::vector<float> dx(d.n * d.in), want_dx;
  Rng(9).FillUniform(dx.data(), d.n * d.in, -1, 1);
  want_dx = dx;
  std::vector<double> abs_dx(dx.size());
  for (size_t i = 0; i < dx.size(); ++i) abs_dx[i] = std::abs(double{dx[i]});
  for (int64_t t = 0; t < d.n; ++t) {
    for (int64_t i = 0; i < d.in; ++i) {
      for (int64_t o = 0; o < d.out; ++o) abs_dx[t * d.in + i] += std::abs(double{dy[t * d.out + o]} * w[o * d.in + i]);
    }
  }
  LinearBackwardInput(dy.data(), w.data(), dx.data(), d, true);
  LinearBackwardInputReference(dy.data(), w.data(), want_dx.data(), d, true);
  ExpectWithinFp32SumBound(dx, want_dx, abs_dx, d.out + 1, "B");
  // W, accumulating onto a nonzero dw.
  std::vector<float> dw(d.out * d.in), want_dw;
  Rng(10).FillUniform(dw.data(), d.out * d.in, -1, 1);
  want_dw = dw;
  std::vector<double> abs_dw(dw.size());
  for (size_t i = 0; i < dw.size(); ++i) abs_dw[i] = std::abs(double{dw[i]});
  for (int64_t o = 0; o < d.out; ++o) {
    for (int64_t i = 0; i < d.in; ++i) {
      for (int64_t t = 0; t < d.n; ++t) abs_dw[o * d.in + i] += std::abs(double{dy[t * d.out + o]} * x[t * d.in + i]);
    }
  }
  LinearBackwardWeight(dy.data(), x.data(), dw.data(), d);
  LinearBackwardWeightReference(dy.data(), x.data(), want_dw.data(), d);
  ExpectWithinFp32SumBound(dw, want_dw, abs_dw, d.n + 1, "W");
}

// Bit-exact checkpoint resume needs the same bits from the same inputs every time, whatever the
// buffers' addresses (a resumed run allocates anew), at one thread and at several.
TEST(LinearTest, Fp32GemmsAreBitExactOnRerunsAtAFixedThreadCount) {
  const LinearDims d = kBig;
  std::vector<float> x(d.n * d.in), w(d.out * d.in), dy(d.n * d.out);
  Rng(11).FillUniform(x.data(), d.n * d.in, -1, 1);
  Rng(12).FillUniform(w.data(), d.out * d.in, -1, 1);
  Rng(13).FillUniform(dy.data(), d.n * d.out, -1, 1);
  auto run = [&](int offset) {  // inputs copied to buffers shifted by `offset` floats
    std::vector<float> xs(x.size() + offset), ws(w.size() + offset), dys(dy.size() + offset);
    std::copy(x.begin(), x.end(), xs.begin() + offset);
    std::copy(w.begin(), w.end(), ws.begin() + offset);
    std::copy(dy.begin(), dy.end(), dys.begin() + offset);
    std::vector<float> y(d.n * d.out), dx(d.n * d.in), dw(d.out * d.in, 0.0f), out;
    LinearForward(xs.data() + offset, ws.data() + offset, y.data(), d);
    LinearBackwardInput(dys.data() + offset, ws.data() + offset, dx.data(), d, false);
    LinearBackwardWeight(dys.data() + offset, xs.data() + offset, dw.data(), d);
    out = y;
    out.insert(out.end(), dx.begin(), dx.end());
    out.insert(out.end(), dw.begin(), dw.end());
    return out;
  };
  const int before = GemmThreads();
  for (int threads : {1, 2}) {
    SetGemmThreads(threads);
    EXPECT_EQ(GemmThreads(), threads);
    const std::vector<float> first = run(0);
    for (int offset : {0, 1, 3, 16}) {
      EXPECT_TRUE(run(offset) == first) << threads << " thread(s), offset " << offset;
    }
  }
  SetGemmThreads(before);
}

TEST(LinearTest, EmptyDimensionsAreHandled) {
  std::vector<float> x(6, 1.0f), y(6, 7.0f), dx(6, 5.0f);
  LinearForward(x.data(), x.data(), y.data(), {3, 0, 2});  // no input features: y = 0
  EXPECT_EQ(y, std::vector<float>(6, 0.0f));
  LinearBackwardInput(x.data(), x.data(), dx.data(), {3, 2, 0}, true);  // nothing to add
  EXPECT_EQ(dx, std::vector<float>(6, 5.0f));
  LinearBackwardInput(x.data(), x.data(), dx.data(), {3, 2, 0}, false);
  EXPECT_EQ(dx, std::vector<float>(6, 0.0f));
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

// Debian 12's OpenBLAS (0.3.21) does not know CPUs newer than it and falls back to its generic
// Prescott (SSE3) kernels, 4-5x slower (the cpp-kernels machines: Emerald Rapids, family 6 model
// 207). This binary links the GEMMs, so linear.cc ran it again with kernels the CPU supports; the
// name comes from OpenBLAS itself. Without that rerun this fails on such a CPU.
TEST(LinearTest, OpenBlasRunsKernelsTheCpuSupports) {
  __builtin_cpu_init();
  const std::string core = BlasCoreName();
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  std::printf("OpenBLAS kernels: %s (OPENBLAS_CORETYPE %s)\n", core.c_str(), env ? env : "unset");
  EXPECT_FALSE(core.empty());
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_NE(core, "Prescott");
  }
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
