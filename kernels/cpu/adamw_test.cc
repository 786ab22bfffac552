#include "kernels/cpu/adamw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace pipecoord::kernels::cpu {
namespace {

TEST(AdamWTest, FirstStepMovesEachWeightByLrAgainstTheGradientSign) {
  // With bias correction, step 1 gives mhat = g, vhat = g^2: the update is lr * g/(|g| + eps).
  std::vector<double> p = {1.0, -2.0, 0.5}, g = {0.3, -4.0, 0.0}, m(3, 0.0), v(3, 0.0);
  AdamWOptions opt;
  opt.lr = 0.1;
  opt.eps = 0.0;
  AdamWStep(p.data(), g.data(), m.data(), v.data(), 2, opt, 1);  // third element untouched
  EXPECT_NEAR(p[0], 0.9, 1e-15);
  EXPECT_NEAR(p[1], -1.9, 1e-15);
  EXPECT_EQ(p[2], 0.5);
  EXPECT_NEAR(m[0], 0.1 * 0.3, 1e-17);
  EXPECT_NEAR(v[1], 0.05 * 16.0, 1e-15);
}

TEST(AdamWTest, DecoupledDecayShrinksTheWeightBeforeTheAdamUpdate) {
  std::vector<float> p = {2.0f}, g = {0.0f}, m = {0.0f}, v = {0.0f};
  AdamWOptions opt;
  opt.lr = 0.01;
  opt.weight_decay = 0.5;
  AdamWStep(p.data(), g.data(), m.data(), v.data(), 1, opt, 1);
  EXPECT_FLOAT_EQ(p[0], 2.0f * (1.0f - 0.005f));  // zero gradient: only the decay acts
}

TEST(AdamWTest, MatchesAReferenceLoopOverSeveralSteps) {
  AdamWOptions opt;
  opt.lr = 0.05;
  opt.weight_decay = 0.1;
  std::vector<double> p = {0.7}, m = {0.0}, v = {0.0};
  double rp = 0.7, rm = 0, rv = 0;
  for (int step = 1; step <= 5; ++step) {
    const double g = std::sin(step) * 0.5;
    AdamWStep(p.data(), &g, m.data(), v.data(), 1, opt, step);
    rp *= 1 - opt.lr * opt.weight_decay;
    rm = 0.9 * rm + 0.1 * g;
    rv = 0.95 * rv + 0.05 * g * g;
    rp -= opt.lr * (rm / (1 - std::pow(0.9, step))) /
          (std::sqrt(rv / (1 - std::pow(0.95, step))) + opt.eps);
    EXPECT_NEAR(p[0], rp, 1e-15) << "step " << step;
  }
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
