// The elementwise kernels themselves (elementwise_kernels.h, the code nvcc builds) run on the
// CPU under kernels/cuda/cuda_emulation.h, launched with elementwise.cu's block size, against
// plain host arithmetic, exactly (one float addition then one rounding to the storage type; one
// rounding to bf16; one double addition). Outputs start as NaN, so an element a kernel leaves
// unwritten fails. A grid of 2 blocks over 1000 elements takes the grid-stride loops twice
// round. Runs everywhere.
#include "kernels/cuda/cuda_emulation.h"
// The emulation first, then the kernels it runs.
#include "worker/cuda/elementwise_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/rng.h"

namespace pipecoord::worker::cuda {
namespace {

namespace em = kernels::cuda::emulation;
using namespace elementwise;  // NOLINT: the kernels under test

constexpr int64_t kN = 1000;
const dim3 kGrid{2, 1, 1};
const dim3 kBlock{kThreads, 1, 1};

std::vector<float> Random(uint64_t seed, int64_t n, double lo, double hi) {
  std::vector<float> v(static_cast<size_t>(n));
  kernels::cpu::Rng(seed).FillUniform(v.data(), n, lo, hi);
  return v;
}

uint32_t Bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

TEST(ElementwiseEmulatedTest, AddInPlaceAddsInFloatAndRoundsOnceToTheStorageType) {
  const std::vector<float> a = Random(1, kN, -3, 3), x = Random(2, kN, -3, 3);
  std::vector<float> acc = a;
  em::Launch(kGrid, kBlock, [&] { AddInPlaceKernel<float>(acc.data(), x.data(), kN); });
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(Bits(acc[i]), Bits(a[i] + x[i])) << i;

  const std::vector<__nv_bfloat16> ab = em::Stored<__nv_bfloat16>(a), xb = em::Stored<__nv_bfloat16>(x);
  std::vector<__nv_bfloat16> accb = ab;
  em::Launch(kGrid, kBlock, [&] { AddInPlaceKernel<__nv_bfloat16>(accb.data(), xb.data(), kN); });
  const std::vector<float> af = em::Floats(ab), xf = em::Floats(xb), got = em::Floats(accb);
  for (int64_t i = 0; i < kN; ++i) {
    const float want = kernels::cuda::Bf16BitsToFloat(kernels::cuda::FloatToBf16Bits(af[i] + xf[i]));
    ASSERT_EQ(Bits(got[i]), Bits(want)) << i;
  }
}

// The bias of a [rows, cols] projection output: column c of every row gets b[c] (a bias read at
// the wrong column or row stride fails); its gradient sums each column in row order, added to
// what the gradient held, exactly the host loop's float additions.
TEST(ElementwiseEmulatedTest, AddBiasBroadcastsOverRowsAndItsGradientSumsColumnsInRowOrder) {
  constexpr int64_t kRows = 37, kCols = 45;  // rows * cols past one grid's threads (2 x 256)
  const std::vector<float> y0 = Random(5, kRows * kCols, -3, 3), b = Random(6, kCols, -1, 1);
  std::vector<float> y = y0;
  em::Launch(kGrid, kBlock, [&] { AddBiasKernel<float>(y.data(), b.data(), kRows, kCols); });
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kCols; ++c) {
      ASSERT_EQ(Bits(y[r * kCols + c]), Bits(y0[r * kCols + c] + b[c])) << r << ", " << c;
    }
  }
  const std::vector<__nv_bfloat16> yb0 = em::Stored<__nv_bfloat16>(y0), bb = em::Stored<__nv_bfloat16>(b);
  std::vector<__nv_bfloat16> yb = yb0;
  em::Launch(kGrid, kBlock, [&] { AddBiasKernel<__nv_bfloat16>(yb.data(), bb.data(), kRows, kCols); });
  const std::vector<float> yf0 = em::Floats(yb0), bf = em::Floats(bb), got = em::Floats(yb);
  for (int64_t i = 0; i < kRows * kCols; ++i) {
    const float want = kernels::cuda::Bf16BitsToFloat(kernels::cuda::FloatToBf16Bits(yf0[i] + bf[i % kCols]));
    ASSERT_EQ(Bits(got[i]), Bits(want)) << i;
  }

  // The gradient: one warp (fewer threads than columns), so the column loop goes round.
  const std::vector<float> dy = Random(7, kRows * kCols, -2, 2), db0 = Random(8, kCols, -1, 1);
  std::vector<float> db = db0;
  em::Launch(dim3{1, 1, 1}, dim3{32, 1, 1}, [&] { AddBiasGradKernel<float>(dy.data(), db.data(), kRows, kCols); });
  std::vector<float> want = db0;
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kCols; ++c) want[c] += dy[r * kCols + c];
  }
  for (int64_t c = 0; c < kCols; ++c) ASSERT_EQ(Bits(db[c]), Bits(want[c])) << c;
  const std::vector<__nv_bfloat16> dyb = em::Stored<__nv_bfloat16>(dy);
  const std::vector<float> dyf = em::Floats(dyb);
  std::vector<float> dbb = db0, wantb = db0;
  em::Launch(kGrid, kBlock, [&] { AddBiasGradKernel<__nv_bfloat16>(dyb.data(), dbb.data(), kRows, kCols); });
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kCols; ++c) wantb[c] += dyf[r * kCols + c];
  }
  for (int64_t c = 0; c < kCols; ++c) ASSERT_EQ(Bits(dbb[c]), Bits(wantb[c])) << c;
}

TEST(ElementwiseEmulatedTest, ScaleInPlaceMultipliesOnceInFloat) {
  const std::vector<float> a = Random(4, kN, -300, 300);
  std::vector<float> x = a;
  const float factor = 1.0f / 3.0f;
  em::Launch(kGrid, kBlock, [&] { ScaleInPlaceKernel(x.data(), factor, kN); });
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(Bits(x[i]), Bits(a[i] * factor)) << i;
}

TEST(ElementwiseEmulatedTest, CastToBf16RoundsToNearestEvenAndWritesEveryElement) {
  std::vector<float> in = Random(3, kN, -100, 100);
  in[7] = 1.00390625f;  // exactly between two bf16 values: rounds to the even one (1.0)
  in[8] = 1.01171875f;  // halfway between 1.0078125 and 1.015625: to the even 1.015625
  in[9] = 3.4e38f;      // past bf16's largest finite value (about 3.39e38): infinity
  std::vector<__nv_bfloat16> out = em::Poisoned<__nv_bfloat16>(kN);
  em::Launch(kGrid, kBlock, [&] { CastToBf16Kernel(in.data(), out.data(), kN); });
  const std::vector<float> got = em::Floats(out);
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(out[i].bits, kernels::cuda::FloatToBf16Bits(in[i])) << i;
  }
  EXPECT_EQ(got[7], 1.0f);
  EXPECT_EQ(got[8], 1.015625f);
  EXPECT_TRUE(std::isinf(got[9]));
}

TEST(ElementwiseEmulatedTest, SumOfSquaresCoversEveryElementOnceInDouble) {
  // 1000 elements over 3 blocks (the grid-stride loop goes round twice) and a sequential sum in
  // long double to compare against: only the order of the double additions differs.
  const std::vector<float> x = Random(5, kN, -2, 2);
  long double want = 0;
  for (float v : x) want += static_cast<long double>(v) * v;
  std::vector<double> partials(kSumOfSquaresBlocks, std::nan(""));
  double acc = 0.5;
  const dim3 grid{3, 1, 1};
  em::Launch(grid, kBlock, [&] { SumOfSquaresPartialKernel(x.data(), kN, partials.data()); });
  em::Launch(dim3{1, 1, 1}, dim3{kScalarThreads, 1, 1}, [&] { AddPartialSumsKernel(partials.data(), 3, &acc); });
  EXPECT_NEAR(acc, 0.5 + static_cast<double>(want), 1e-12 * static_cast<double>(want));
  EXPECT_TRUE(std::isnan(partials[3])) << "only the launched blocks write";
  // Changing one element changes the sum by exactly its square's difference (every element counted).
  std::vector<float> y = x;
  y[999] = 10.0f;
  double acc2 = 0.5;
  em::Launch(grid, kBlock, [&] { SumOfSquaresPartialKernel(y.data(), kN, partials.data()); });
  em::Launch(dim3{1, 1, 1}, dim3{kScalarThreads, 1, 1}, [&] { AddPartialSumsKernel(partials.data(), 3, &acc2); });
  EXPECT_NEAR(acc2 - acc, 100.0 - static_cast<double>(x[999]) * x[999], 1e-9);
}

TEST(ElementwiseEmulatedTest, AccumulateScalarAddsOnceFromOneThread) {
  double acc = 1.5;
  const double d = 0.25;
  const float f = 0.125f;
  em::Launch(dim3{1, 1, 1}, dim3{kScalarThreads, 1, 1}, [&] { AccumulateScalarKernel<double>(&acc, &d); });
  EXPECT_EQ(acc, 1.75);  // 32 threads launched, one added
  em::Launch(dim3{1, 1, 1}, dim3{kScalarThreads, 1, 1}, [&] { AccumulateScalarKernel<float>(&acc, &f); });
  EXPECT_EQ(acc, 1.875);
}

}  // namespace
}  // namespace pipecoord::worker::cuda
