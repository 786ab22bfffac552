// Exact orders and the closed forms of fthenb, 1f1b and eager-1f1b.
#include <gtest/gtest.h>

#include "schedules/test_util.h"

namespace pipecoord::schedules {
namespace {

using testing::MustGenerate;
using testing::MustSimulate;
using testing::RankText;
using testing::Spec;

TEST(OneFOneBTest, ExactOrderP2M4) {
  Schedule s = MustGenerate("1f1b", Spec(2, 4));
  EXPECT_EQ(RankText(s.ranks[0]), "0F0 0F1 0BW0 0F2 0BW1 0F3 0BW2 0BW3");
  EXPECT_EQ(RankText(s.ranks[1]), "1F0 1BW0 1F1 1BW1 1F2 1BW2 1F3 1BW3");
}

TEST(OneFOneBTest, FewerMicroBatchesThanRanks) {
  Schedule s = MustGenerate("1f1b", Spec(4, 2));
  EXPECT_EQ(RankText(s.ranks[0]), "0F0 0F1 0BW0 0BW1");
  EXPECT_EQ(RankText(s.ranks[3]), "3F0 3BW0 3F1 3BW1");
  EXPECT_TRUE(BuildSchedule("1f1b", Spec(4, 2)).ok());
}

TEST(FThenBTest, ExactOrderP2M3) {
  Schedule s = MustGenerate("fthenb", Spec(2, 3));
  EXPECT_EQ(RankText(s.ranks[0]), "0F0 0F1 0F2 0BW0 0BW1 0BW2");
  EXPECT_EQ(RankText(s.ranks[1]), "1F0 1F1 1F2 1BW0 1BW1 1BW2");
}

TEST(EagerOneFOneBTest, OneMoreWarmupForwardPerRank) {
  Schedule s = MustGenerate("eager-1f1b", Spec(3, 5));
  EXPECT_EQ(RankText(s.ranks[0]), "0F0 0F1 0F2 0F3 0BW0 0F4 0BW1 0BW2 0BW3 0BW4");
  EXPECT_EQ(RankText(s.ranks[2]), "2F0 2F1 2BW0 2F2 2BW1 2F3 2BW2 2F4 2BW3 2BW4");
  CostModel c;
  Simulation sim = MustSimulate(s, c);
  EXPECT_DOUBLE_EQ(sim.ranks[0].peak_activations, 4);  // p - r + 1
  EXPECT_DOUBLE_EQ(sim.ranks[2].peak_activations, 2);
}

// (m + p - 1)(f + b + w) for both, over a grid of shapes and uneven costs.
TEST(OneFOneBTest, MakespanClosedForm) {
  for (const char* name : {"1f1b", "fthenb"}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 3 * p; m += (m < p ? 1 : p / 2 + 1)) {
        for (auto [f, b, w] : {std::tuple{1.0, 1.0, 1.0}, std::tuple{1.0, 2.0, 0.5}, std::tuple{2.0, 1.5, 1.0}}) {
          CostModel c;
          c.f = f;
          c.b = b;
          c.w = w;
          Simulation sim = MustSimulate(MustGenerate(name, Spec(p, m)), c);
          EXPECT_NEAR(sim.makespan, (m + p - 1) * (f + b + w), 1e-9)
              << name << " p=" << p << " m=" << m << " f,b,w=" << f << "," << b << "," << w;
        }
      }
    }
  }
}

TEST(OneFOneBTest, PeakActivationsRankRHoldsPMinusR) {
  const int p = 6, m = 12;
  Simulation sim = MustSimulate(MustGenerate("1f1b", Spec(p, m)), CostModel{});
  for (int r = 0; r < p; ++r) EXPECT_DOUBLE_EQ(sim.ranks[r].peak_activations, p - r) << r;
  Simulation gpipe = MustSimulate(MustGenerate("fthenb", Spec(p, m)), CostModel{});
  for (int r = 0; r < p; ++r) EXPECT_DOUBLE_EQ(gpipe.ranks[r].peak_activations, m) << r;
}

TEST(OneFOneBTest, RefusesChunks) {
  auto s = GenerateComputeOrder("1f1b", Spec(2, 4, 2));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "vpp: schedule 1f1b places exactly 1 chunk(s) per rank, got 2");
}

}  // namespace
}  // namespace pipecoord::schedules
