// The row-major -> column-major mapping of F, B and W, checked on the CPU: a plain column-major
// GEMM run with each plan must reproduce kernels/cpu/linear on the same buffers. Metric: max
// |plan - cpu| / max |cpu| < 1e-12 (both sum in double, in different orders).
#include "kernels/cuda/column_major_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/linear.h"
#include "kernels/cpu/rng.h"

namespace pipecoord::kernels::cuda {
namespace {

// D = alpha op(A) op(B) + beta C on column-major storage, written into c (C = D).
void ReferenceGemm(const ColumnMajorGemm& g, const double* a, const double* b, double* c,
                   double beta) {
  auto op_a = [&](int64_t i, int64_t l) {
    return g.transpose_a ? a[l + i * g.a.ld] : a[i + l * g.a.ld];
  };
  auto op_b = [&](int64_t l, int64_t j) {
    return g.transpose_b ? b[j + l * g.b.ld] : b[l + j * g.b.ld];
  };
  for (int64_t j = 0; j < g.n; ++j) {
    for (int64_t i = 0; i < g.m; ++i) {
      double acc = 0;
      for (int64_t l = 0; l < g.k; ++l) acc += op_a(i, l) * op_b(l, j);
      double& out = c[i + j * g.c.ld];
      out = acc + (beta == 0 ? 0.0 : beta * out);
    }
  }
}

// The plan's shapes agree with each other and with the buffers they describe.
void ExpectConsistent(const ColumnMajorGemm& g, int64_t a_size, int64_t b_size, int64_t c_size) {
  EXPECT_EQ(g.transpose_a ? g.a.cols : g.a.rows, g.m);
  EXPECT_EQ(g.transpose_a ? g.a.rows : g.a.cols, g.k);
  EXPECT_EQ(g.transpose_b ? g.b.cols : g.b.rows, g.k);
  EXPECT_EQ(g.transpose_b ? g.b.rows : g.b.cols, g.n);
  EXPECT_EQ(g.c.rows, g.m);
  EXPECT_EQ(g.c.cols, g.n);
  EXPECT_GE(g.a.ld, g.a.rows);
  EXPECT_GE(g.b.ld, g.b.rows);
  EXPECT_GE(g.c.ld, g.c.rows);
  EXPECT_EQ(g.a.ld * g.a.cols, a_size);
  EXPECT_EQ(g.b.ld * g.b.cols, b_size);
  EXPECT_EQ(g.c.ld * g.c.cols, c_size);
}

std::vector<double> Random(cpu::Rng& rng, int64_t size) {
  std::vector<double> v(static_cast<size_t>(size));
  rng.FillUniform(v.data(), size, -1.0, 1.0);
  return v;
}

double RelativeError(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return diff / scale;
}

class ColumnMajorGemmTest : public ::testing::TestWithParam<cpu::LinearDims> {};

TEST_P(ColumnMajorGemmTest, ForwardMatchesCpu) {
  const cpu::LinearDims d = GetParam();
  cpu::Rng rng(11);
  const auto x = Random(rng, d.n * d.in), w = Random(rng, d.out * d.in);
  std::vector<double> want(static_cast<size_t>(d.n * d.out)), got(want.size(), NAN);
  cpu::LinearForward(x.data(), w.data(), want.data(), d);
  const ColumnMajorGemm g = PlanColumnMajorGemm(LinearStep::kForward, d);
  ExpectConsistent(g, d.out * d.in, d.n * d.in, d.n * d.out);
  ReferenceGemm(g, /*a=*/w.data(), /*b=*/x.data(), got.data(), /*beta=*/0);
  EXPECT_LT(RelativeError(got, want), 1e-12);
}

TEST_P(ColumnMajorGemmTest, BackwardInputMatchesCpuOverwritingAndAccumulating) {
  const cpu::LinearDims d = GetParam();
  cpu::Rng rng(12);
  const auto dy = Random(rng, d.n * d.out), w = Random(rng, d.out * d.in);
  const ColumnMajorGemm g = PlanColumnMajorGemm(LinearStep::kBackwardInput, d);
  ExpectConsistent(g, d.out * d.in, d.n * d.out, d.n * d.in);
  for (bool accumulate : {false, true}) {
    std::vector<double> want = Random(rng, d.n * d.in);
    std::vector<double> got = accumulate ? want : std::vector<double>(want.size(), NAN);
    cpu::LinearBackwardInput(dy.data(), w.data(), want.data(), d, accumulate);
    ReferenceGemm(g, /*a=*/w.data(), /*b=*/dy.data(), got.data(), accumulate ? 1.0 : 0.0);
    EXPECT_LT(RelativeError(got, want), 1e-12) << "accumulate " << accumulate;
  }
}

TEST_P(ColumnMajorGemmTest, BackwardWeightAccumulatesLikeCpu) {
  const cpu::LinearDims d = GetParam();
  cpu::Rng rng(13);
  const auto dy = Random(rng, d.n * d.out), x = Random(rng, d.n * d.in);
  std::vector<double> want = Random(rng, d.out * d.in), got = want;
  cpu::LinearBackwardWeight(dy.data(), x.data(), want.data(), d);
  const ColumnMajorGemm g = PlanColumnMajorGemm(LinearStep::kBackwardWeight, d);
  ExpectConsistent(g, d.n * d.in, d.n * d.out, d.out * d.in);
  ReferenceGemm(g, /*a=*/x.data(), /*b=*/dy.data(), got.data(), /*beta=*/1);
  EXPECT_LT(RelativeError(got, want), 1e-12);
}

// Distinct odd sizes, so a swapped dimension or leading dimension cannot pass by symmetry.
INSTANTIATE_TEST_SUITE_P(Shapes, ColumnMajorGemmTest,
                         ::testing::Values(cpu::LinearDims{5, 7, 3}, cpu::LinearDims{1, 13, 11},
                                           cpu::LinearDims{17, 1, 9}, cpu::LinearDims{6, 10, 1},
                                           cpu::LinearDims{33, 24, 40}));

TEST(LinearStepNameTest, NamesEachStep) {
  EXPECT_STREQ(LinearStepName(LinearStep::kForward), "F y = x w^T");
  EXPECT_STREQ(LinearStepName(LinearStep::kBackwardInput), "B dx = dy w");
  EXPECT_STREQ(LinearStepName(LinearStep::kBackwardWeight), "W dw += dy^T x");
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
