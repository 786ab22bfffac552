#include "schedules/simulator.h"

#include <gtest/gtest.h>

#include "schedules/test_util.h"

namespace pipecoord::schedules {
namespace {

using testing::MustGenerate;
using testing::MustSimulate;
using testing::Spec;

template <typename T>
T MustOk(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

TEST(SimulatorTest, OneFOneBTimelineByHand) {
  // p=2, m=2, f=b=w=1 (BW=2). Rank 1: F0 [1,2] BW0 [2,4] F1 [4,5] BW1 [5,7];
  // rank 0: F0 [0,1] F1 [1,2] BW0 [4,6] BW1 [7,9].
  Schedule s = MustGenerate("1f1b", Spec(2, 2));
  Simulation sim = MustSimulate(s, CostModel{});
  auto at = [&](int r, int i) { return std::pair{sim.timing[r][i].start, sim.timing[r][i].end}; };
  EXPECT_EQ(at(0, 0), (std::pair{0.0, 1.0}));
  EXPECT_EQ(at(0, 1), (std::pair{1.0, 2.0}));
  EXPECT_EQ(at(0, 2), (std::pair{4.0, 6.0}));
  EXPECT_EQ(at(0, 3), (std::pair{7.0, 9.0}));
  EXPECT_EQ(at(1, 0), (std::pair{1.0, 2.0}));
  EXPECT_EQ(at(1, 1), (std::pair{2.0, 4.0}));
  EXPECT_EQ(at(1, 2), (std::pair{4.0, 5.0}));
  EXPECT_EQ(at(1, 3), (std::pair{5.0, 7.0}));
  EXPECT_DOUBLE_EQ(sim.makespan, 9);
  EXPECT_DOUBLE_EQ(sim.bubble_rate, 1.0 - 12.0 / 18.0);
  ASSERT_EQ(sim.ranks[0].idle.size(), 2u);
  EXPECT_DOUBLE_EQ(sim.ranks[0].idle[0].start, 2);
  EXPECT_DOUBLE_EQ(sim.ranks[0].idle[0].end, 4);
  EXPECT_DOUBLE_EQ(sim.ranks[0].idle[1].start, 6);
  EXPECT_DOUBLE_EQ(sim.ranks[0].idle[1].end, 7);
  ASSERT_EQ(sim.ranks[1].idle.size(), 2u);
  EXPECT_DOUBLE_EQ(sim.ranks[1].idle[0].end, 1);
  EXPECT_DOUBLE_EQ(sim.ranks[1].idle[1].start, 7);
  EXPECT_DOUBLE_EQ(sim.ranks[1].idle[1].end, 9);
  EXPECT_DOUBLE_EQ(sim.ranks[0].busy, 6);
  // Rank spans: rank 0 [0,9], rank 1 [1,7]; the longest is 9.
  EXPECT_DOUBLE_EQ(sim.rank_span_bubble_rate, 1.0 - 12.0 / 18.0);
}

TEST(SimulatorTest, CommunicationDelaysCrossRankInputs) {
  CostModel c;
  c.comm = 0.5;
  Simulation sim = MustSimulate(MustGenerate("1f1b", Spec(2, 1)), c);
  // F0 [0,1] -> +0.5 -> F0 on rank 1 [1.5,2.5], BW [2.5,4.5] -> +0.5 -> BW on rank 0 [5,7].
  EXPECT_DOUBLE_EQ(sim.timing[1][0].start, 1.5);
  EXPECT_DOUBLE_EQ(sim.timing[0][1].start, 5.0);
  EXPECT_DOUBLE_EQ(sim.makespan, 7.0);
}

TEST(SimulatorTest, SlowRankStretchesEveryoneElse) {
  CostModel c;
  c.rank_slowdown = {1.0, 2.0};
  Simulation sim = MustSimulate(MustGenerate("1f1b", Spec(2, 4)), c);
  // The slow last rank is busy 4 x 6 = 24 after waiting 1 for its first input; rank 0 ends
  // with its last BW (3) after the last rank's.
  EXPECT_DOUBLE_EQ(sim.ranks[1].busy, 24);
  EXPECT_DOUBLE_EQ(sim.makespan, 1 + 24 + 2);
}

TEST(SimulatorTest, StageFractionsScaleCostsAndActivations) {
  CostModel c;
  c.stage_fraction = {0.5, 1.5};  // rank 0 holds a third of the layers, rank 1 the rest
  Simulation sim = MustSimulate(MustGenerate("1f1b", Spec(2, 1)), c);
  EXPECT_DOUBLE_EQ(sim.makespan, 0.5 + 1.5 + 3.0 + 1.0);
  EXPECT_DOUBLE_EQ(sim.ranks[0].peak_activations, 0.5);
  EXPECT_DOUBLE_EQ(sim.ranks[1].peak_activations, 1.5);
}

TEST(SimulatorTest, SplitBackwardKeepsTheWShareUntilW) {
  Schedule s = MakeSchedule("hand", 1, 1, 2, LoopedPlacement(1, 1));
  s.ranks[0] = {{Op::kF, 0, 0}, {Op::kF, 0, 1}, {Op::kB, 0, 0}, {Op::kB, 0, 1},
                {Op::kW, 0, 0}, {Op::kW, 0, 1}};
  CostModel c;
  c.w_share = 0.25;
  StageCosts sc = ResolveCosts(c, s);
  EXPECT_DOUBLE_EQ(PeakActivations(s, sc)[0], 2.0);
  // A third F after both B's would count 0.25 + 0.25 + 1.
  s.ranks[0].insert(s.ranks[0].begin() + 4, Action{Op::kF, 0, 1});
  s.ranks[0].erase(s.ranks[0].begin() + 1);
  EXPECT_DOUBLE_EQ(PeakActivations(s, sc)[0], 1.0);
}

TEST(SimulatorTest, MissingInputIsReportedNotHung) {
  Schedule s = MakeSchedule("hand", 2, 1, 1, LoopedPlacement(2, 1));
  s.ranks[0] = {{Op::kF, 0, 0}, {Op::kBW, 0, 0}};
  s.ranks[1] = {{Op::kBW, 1, 0}};  // its F never runs
  auto sim = Simulate(s, CostModel{});
  ASSERT_FALSE(sim.ok());
  EXPECT_EQ(sim.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(sim.status().message().find("rank 0 waits at position 1 (0BW0)"), std::string::npos);
  EXPECT_NE(sim.status().message().find("rank 1 waits at position 0 (1BW0)"), std::string::npos);
}

TEST(SimulatorTest, BadShapeIsAnErrorNotACrash) {
  Schedule s = MakeSchedule("hand", 2, 1, 1, LoopedPlacement(2, 1));
  s.ranks[0] = {{Op::kF, 7, 0}};
  auto sim = Simulate(s, CostModel{});
  ASSERT_FALSE(sim.ok());
  EXPECT_EQ(sim.status().message(), "rank 0, position 0 (7F0): stage must be in 0..1");
}

TEST(SimulatorTest, ExplicitDurationsTimeEveryActionIncludingSends) {
  // p=2, m=1, 1f1b with hand-made lists: rank 0 F0 SEND_F BW0, rank 1 F0 BW0 SEND_B.
  Schedule s = MakeSchedule("hand", 2, 1, 1, LoopedPlacement(2, 1));
  s.ranks[0] = {{Op::kF, 0, 0}, {Op::kSendF, 0, 0, 1}, {Op::kBW, 0, 0}};
  s.ranks[1] = {{Op::kF, 1, 0}, {Op::kBW, 1, 0}, {Op::kSendB, 1, 0, 0}};
  ActionDurations d;
  d.duration = {{1.0, 0.25, 3.0}, {2.0, 4.0, 0.5}};
  d.comm = 0.5;
  Simulation sim = MustOk(SimulateDurations(s, d));
  // Rank 0: F [0,1], send [1,1.25]; rank 1: F [1.5,3.5], BW [3.5,7.5], send [7.5,8];
  // rank 0's BW waits for rank 1's BW + comm: [8,11]. The send counts as idle, not busy.
  EXPECT_DOUBLE_EQ(sim.timing[0][1].end, 1.25);
  EXPECT_DOUBLE_EQ(sim.timing[1][0].start, 1.5);
  EXPECT_DOUBLE_EQ(sim.timing[1][2].start, 7.5);
  EXPECT_DOUBLE_EQ(sim.timing[0][2].start, 8.0);
  EXPECT_DOUBLE_EQ(sim.makespan, 11.0);
  EXPECT_DOUBLE_EQ(sim.ranks[0].busy, 4.0);
  EXPECT_DOUBLE_EQ(sim.ranks[1].busy, 6.0);
  EXPECT_DOUBLE_EQ(sim.bubble_rate, 1.0 - 10.0 / 22.0);
}

TEST(SimulatorTest, ExplicitDurationsMatchTheCostModelTheyComeFrom) {
  Schedule s = MustGenerate("zbh1", Spec(4, 8));
  CostModel c;
  c.f = 1.0;
  c.b = 1.5;
  c.w = 0.75;
  c.comm = 0.125;
  c.stage_fraction = {0.5, 1.0, 1.0, 1.5};
  const StageCosts sc = ResolveCosts(c, s);
  ActionDurations d;
  d.comm = c.comm;
  for (const auto& list : s.ranks) {
    auto& row = d.duration.emplace_back();
    for (const Action& a : list) row.push_back(sc.Duration(a));
  }
  Simulation a = MustSimulate(s, c);
  Simulation b = MustOk(SimulateDurations(s, d));
  EXPECT_DOUBLE_EQ(a.makespan, b.makespan);
  EXPECT_DOUBLE_EQ(a.bubble_rate, b.bubble_rate);
  for (int r = 0; r < 4; ++r) EXPECT_DOUBLE_EQ(a.ranks[r].busy, b.ranks[r].busy);
}

TEST(SimulatorTest, ExplicitDurationsOfTheWrongShapeAreRefused) {
  Schedule s = MustGenerate("1f1b", Spec(2, 2));
  ActionDurations d;
  d.duration = {{1, 1, 1, 1}, {1, 1, 1}};
  EXPECT_EQ(SimulateDurations(s, d).status().message(), "duration[1]: expected one value per action (4), got 3");
  d.duration[1].push_back(-1);
  EXPECT_EQ(SimulateDurations(s, d).status().message(), "duration[1][3]: must be a finite number >= 0, got -1.000000");
}

}  // namespace
}  // namespace pipecoord::schedules
