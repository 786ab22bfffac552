#include "kernels/cpu/rotary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/cpu/gradient_check.h"

namespace pipecoord::kernels::cpu {
namespace {

using testing::Inner;
using testing::NumericGradient;
using testing::RandomVector;
using testing::RelativeError;
using testing::ReportError;

TEST(RotaryTest, PositionZeroIsIdentityAndNormIsKept) {
  const RopeTable t = MakeRopeTable(3, 4);
  std::vector<double> x = RandomVector(3 * 2 * 4, 21);  // batch 1, seq 3, heads 2, head_dim 4
  const std::vector<double> before = x;
  RopeForward(x.data(), t, 1, 2);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(x[i], before[i]) << i;  // position 0: angle 0
  for (size_t i = 0; i < x.size(); i += 2) {  // every pair keeps its length
    EXPECT_NEAR(std::hypot(x[i], x[i + 1]), std::hypot(before[i], before[i + 1]), 1e-15);
  }
  // Position 1, pair 0 of head 0 turns by exactly 1 radian.
  EXPECT_NEAR(x[8], before[8] * std::cos(1.0) - before[9] * std::sin(1.0), 1e-15);
}

TEST(RotaryTest, BackwardMatchesFiniteDifferences) {
  const int64_t batch = 2, seq = 5, heads = 2, hd = 6;
  const RopeTable t = MakeRopeTable(seq, hd);
  std::vector<double> x = RandomVector(batch * seq * heads * hd, 22);
  const std::vector<double> r = RandomVector(x.size(), 23);
  auto objective = [&] {
    std::vector<double> y = x;
    RopeForward(y.data(), t, batch, heads);
    return Inner(y, r);
  };
  std::vector<double> dx = r;
  RopeBackward(dx.data(), t, batch, heads);
  const double e = RelativeError(dx, NumericGradient(objective, &x, 1e-6));
  ReportError("rope dx (B)", e);
  EXPECT_LT(e, 1e-8);
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
