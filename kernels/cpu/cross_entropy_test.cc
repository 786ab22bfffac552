#include "kernels/cpu/cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/gradient_check.h"

namespace pipecoord::kernels::cpu {
namespace {

using testing::NumericGradient;
using testing::RandomVector;
using testing::RelativeError;
using testing::ReportError;

TEST(CrossEntropyTest, UniformLogitsGiveLogVocab) {
  const std::vector<float> logits(3 * 8, 0.25f);
  const std::vector<int32_t> targets = {0, 7, 3};
  EXPECT_NEAR(CrossEntropyForward(logits.data(), targets.data(), 3, 8), std::log(8.0), 1e-12);
}

TEST(CrossEntropyTest, LargeLogitsDoNotOverflow) {
  const std::vector<float> logits = {1000.0f, 0.0f, -1000.0f};
  const std::vector<int32_t> target = {0};
  EXPECT_NEAR(CrossEntropyForward(logits.data(), target.data(), 1, 3), 0.0, 1e-12);
  std::vector<float> d(3);
  CrossEntropyBackward(logits.data(), target.data(), 1, 3, 1.0, d.data());
  EXPECT_EQ(d[0], 0.0f);
  EXPECT_EQ(d[2], 0.0f);
}

TEST(CrossEntropyTest, BackwardMatchesFiniteDifferencesIncludingTheLossScale) {
  const int64_t n = 6, vocab = 9;
  std::vector<double> logits = RandomVector(n * vocab, 51);
  for (double& l : logits) l *= 3;
  const std::vector<int32_t> targets = {0, 8, 4, 4, 1, 7};
  const double dloss = 0.25;  // e.g. 1/m with m = 4 micro-batches
  auto objective = [&] {
    return dloss * CrossEntropyForward(logits.data(), targets.data(), n, vocab);
  };
  std::vector<double> d(n * vocab);
  CrossEntropyBackward(logits.data(), targets.data(), n, vocab, dloss, d.data());
  const double e = RelativeError(d, NumericGradient(objective, &logits, 1e-6));
  ReportError("cross-entropy dlogits (B)", e);
  EXPECT_LT(e, 1e-8);
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
