#include "kernels/cpu/attention.h"

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

TEST(AttentionTest, CausalRowsSumToOneAndFirstTokenCopiesItsValue) {
  const AttentionDims d{2, 4, 2, 3};
  const int64_t size = d.batch * d.seq * d.hidden();
  const std::vector<float> q = [&] {
    std::vector<float> v(size);
    Rng(31).FillUniform(v.data(), size, -1, 1);
    return v;
  }();
  std::vector<float> k = q, v = q, probs(d.probs_size()), o(size);
  Rng(32).FillUniform(k.data(), size, -1, 1);
  Rng(33).FillUniform(v.data(), size, -1, 1);
  AttentionForward(q.data(), k.data(), v.data(), probs.data(), o.data(), d);
  for (int64_t row = 0; row < d.batch * d.heads * d.seq; ++row) {
    const int64_t i = row % d.seq;
    double sum = 0;
    for (int64_t j = 0; j < d.seq; ++j) {
      const float p = probs[row * d.seq + j];
      if (j > i) {
        EXPECT_EQ(p, 0.0f);
      }
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
  // Token 0 attends only to itself: o_0 = v_0 exactly (probability 1).
  for (int64_t c = 0; c < d.hidden(); ++c) EXPECT_EQ(o[c], v[c]);
}

TEST(AttentionTest, BackwardMatchesFiniteDifferences) {
  const AttentionDims d{2, 5, 2, 4};
  const int64_t size = d.batch * d.seq * d.hidden();
  std::vector<double> q = RandomVector(size, 34), k = RandomVector(size, 35),
                      v = RandomVector(size, 36);
  const std::vector<double> r = RandomVector(size, 37);
  std::vector<double> probs(d.probs_size()), o(size);
  auto objective = [&] {
    AttentionForward(q.data(), k.data(), v.data(), probs.data(), o.data(), d);
    return Inner(o, r);
  };
  objective();
  std::vector<double> dq(size), dk(size), dv(size);
  AttentionBackward(r.data(), q.data(), k.data(), v.data(), probs.data(), dq.data(), dk.data(),
                    dv.data(), d);
  const double eq = RelativeError(dq, NumericGradient(objective, &q, 1e-6));
  const double ek = RelativeError(dk, NumericGradient(objective, &k, 1e-6));
  const double ev = RelativeError(dv, NumericGradient(objective, &v, 1e-6));
  ReportError("attention dq (B)", eq);
  ReportError("attention dk (B)", ek);
  ReportError("attention dv (B)", ev);
  EXPECT_LT(eq, 1e-7);
  EXPECT_LT(ek, 1e-7);
  EXPECT_LT(ev, 1e-7);
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
