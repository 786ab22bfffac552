// Interleaved 1F1B and looped BFS: exact orders, the closed form, and the uneven cases.
#include <gtest/gtest.h>

#include "schedules/interleaved_order.h"
#include "schedules/test_util.h"

namespace pipecoord::schedules {
namespace {

using testing::MustGenerate;
using testing::MustSimulate;
using testing::RankText;
using testing::Spec;

TEST(InterleavedTest, ExactOrderP2V2M4) {
  Schedule s = MustGenerate("interleaved", Spec(2, 4, 2));
  EXPECT_EQ(s.stage_to_rank, (std::vector<int>{0, 1, 0, 1}));
  // Rank 0 warms up with (v-1)*2 + 2(p-1) = 4 forwards.
  EXPECT_EQ(RankText(s.ranks[0]),
            "0F0 0F1 2F0 2F1 0F2 2BW0 0F3 2BW1 2F2 0BW0 2F3 0BW1 2BW2 2BW3 0BW2 0BW3");
  EXPECT_EQ(RankText(s.ranks[1]),
            "1F0 1F1 3F0 3BW0 3F1 3BW1 1F2 1BW0 1F3 1BW1 3F2 3BW2 3F3 3BW3 1BW2 1BW3");
}

TEST(InterleavedTest, GroupsShareTheRemainderEvenly) {
  EXPECT_EQ(InterleavedGroups(4, 8), (std::vector<int>{4, 4}));
  EXPECT_EQ(InterleavedGroups(4, 10), (std::vector<int>{5, 5}));
  EXPECT_EQ(InterleavedGroups(4, 11), (std::vector<int>{6, 5}));
  EXPECT_EQ(InterleavedGroups(4, 13), (std::vector<int>{5, 4, 4}));
  EXPECT_EQ(InterleavedGroups(4, 7), (std::vector<int>{7}));
  EXPECT_EQ(InterleavedGroups(4, 3), (std::vector<int>{3}));
}

double Formula(int p, int v, int m, double t) { return m * t + (p - 1) * t / v; }

// m t + (p-1) t / v exactly when m % p == 0, for equal stage costs.
TEST(InterleavedTest, MakespanClosedFormEvenCase) {
  for (int p = 2; p <= 8; ++p) {
    for (int v = 2; v <= 4; ++v) {
      for (int m = p; m <= 4 * p; m += p) {
        Simulation sim = MustSimulate(MustGenerate("interleaved", Spec(p, m, v)), CostModel{});
        EXPECT_NEAR(sim.makespan, Formula(p, v, m, 3.0), 1e-9) << p << " " << v << " " << m;
      }
    }
  }
}

// Any m >= p: never above the even case's formula (the naive remainder-at-the-end schedule is
// up to 40% slower for these shapes; see NaiveRemainderIsSlower).
TEST(InterleavedTest, UnevenMicroBatchesKeepTheEvenBubble) {
  for (int p = 2; p <= 8; ++p) {
    for (int v = 2; v <= 4; ++v) {
      for (int m = p; m <= 4 * p; ++m) {
        Simulation sim = MustSimulate(MustGenerate("interleaved", Spec(p, m, v)), CostModel{});
        EXPECT_LE(sim.makespan, Formula(p, v, m, 3.0) + 1e-9) << p << " " << v << " " << m;
      }
    }
  }
}

TEST(InterleavedTest, NaiveRemainderIsSlower) {
  // p=4, v=2, m=6 as groups {4, 2}: the short last group stalls.
  const int p = 4, v = 2, m = 6;
  Schedule naive = MakeSchedule("naive", p, v, m, LoopedPlacement(p, v));
  for (int r = 0; r < p; ++r) naive.ranks[r] = InterleavedRankOrder(p, v, r, {4, 2}, Op::kBW);
  ASSERT_TRUE(Validate(naive).ok());
  Simulation slow = MustSimulate(naive, CostModel{});
  Simulation ours = MustSimulate(MustGenerate("interleaved", Spec(p, m, v)), CostModel{});
  EXPECT_DOUBLE_EQ(ours.makespan, Formula(p, v, m, 3.0));  // 22.5
  EXPECT_DOUBLE_EQ(slow.makespan, 27.5);
}

TEST(InterleavedTest, PeakActivationsOfTheWarmup) {
  // Rank r holds its warm-up forwards plus one, each 1/v of a unit: ((v-1)p + 2(p-r-1) + 1)/v.
  const int p = 4, v = 2;
  Simulation sim = MustSimulate(MustGenerate("interleaved", Spec(p, 8, v)), CostModel{});
  for (int r = 0; r < p; ++r) {
    EXPECT_DOUBLE_EQ(sim.ranks[r].peak_activations, ((v - 1) * p + 2 * (p - r - 1) + 1) / double(v)) << r;
  }
  // m = 9: groups {5, 4}, one more warm-up forward per rank.
  Simulation uneven = MustSimulate(MustGenerate("interleaved", Spec(p, 9, v)), CostModel{});
  EXPECT_DOUBLE_EQ(uneven.ranks[0].peak_activations, ((v - 1) * 5 + 2 * (p - 1) + 1) / double(v));
}

TEST(InterleavedTest, FewerMicroBatchesThanRanksStillBeatsOneFOneB) {
  for (int p : {3, 4, 8}) {
    for (int m = 1; m < p; ++m) {
      auto s = BuildSchedule("interleaved", Spec(p, m, 2));
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      EXPECT_LE(MustSimulate(*s, CostModel{}).makespan, (m + p - 1) * 3.0 + 1e-9);
    }
  }
}

TEST(InterleavedTest, UnevenLayersScaleStageCosts) {
  // 10 layers over p=2, v=2: stages hold 3,3,2,2 layers (fractions of a rank's 5: 0.6, 0.4).
  ScheduleSpec spec = Spec(2, 4, 2);
  spec.costs.stage_fraction = {0.6, 0.6, 0.4, 0.4};
  auto s = BuildSchedule("interleaved", spec);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Simulation sim = MustSimulate(*s, spec.costs);
  EXPECT_DOUBLE_EQ(sim.ranks[0].busy, 4 * 3.0);  // every rank still does m t of work
  EXPECT_GE(sim.makespan, Formula(2, 2, 4, 3.0));
}

TEST(LoopedBfsTest, ExactOrderP2V2M2) {
  Schedule s = MustGenerate("looped-bfs", Spec(2, 2, 2));
  EXPECT_EQ(RankText(s.ranks[0]), "0F0 0F1 2F0 2F1 2BW0 2BW1 0BW0 0BW1");
  EXPECT_EQ(RankText(s.ranks[1]), "1F0 1F1 3F0 3F1 3BW0 3BW1 1BW0 1BW1");
  Simulation sim = MustSimulate(s, CostModel{});
  EXPECT_DOUBLE_EQ(sim.ranks[0].peak_activations, 2.0);  // all m micro-batches
}

}  // namespace
}  // namespace pipecoord::schedules
