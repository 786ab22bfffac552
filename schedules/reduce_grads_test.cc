// Data parallel stage by stage: AddReduceGrads's positions, the validator's OPT rule and the
// simulator's reduction lane (REDUCE_GRAD overlapping the rest of the cool-down), by hand.
#include "schedules/reduce_grads.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedules/registry.h"
#include "schedules/simulator.h"
#include "schedules/test_util.h"
#include "schedules/trace_format.h"
#include "schedules/validator.h"

namespace pipecoord::schedules {
namespace {

using testing::RankText;
using testing::Spec;

[[maybe_unused]] Action A(Op op, int stage, int mb = -1) { return Action{op, stage, mb, -1}; }

Schedule MustBuild(const std::string& name, ScheduleSpec spec) {
  spec.reduce_grads = true;
  auto s = BuildSchedule(name, spec);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : Schedule{};
}

TEST(AddReduceGradsTest, OneFOneBAfterEachRanksLastBackward) {
  const Schedule s = MustBuild("1f1b", Spec(2, 3));
  EXPECT_EQ(RankText(s.ranks[0]),
            "0F0 0SEND_F0>1 0F1 0SEND_F1>1 0RECV_B0<1 0BW0 0F2 0SEND_F2>1 0RECV_B1<1 0BW1 0RECV_B2<1 0BW2 "
            "0REDUCE_GRAD");
  // The comm pass keeps a send right after its compute, so the reduction follows the send.
  EXPECT_EQ(RankText(s.ranks[1]),
            "1RECV_F0<0 1RECV_F1<0 1F0 1BW0 1SEND_B0>0 1F1 1RECV_F2<0 1BW1 1SEND_B1>0 1F2 1BW2 1SEND_B2>0 "
            "1REDUCE_GRAD");
}

TEST(AddReduceGradsTest, Zbh1AfterEachRanksLastW) {
  const Schedule s = MustBuild("zbh1", Spec(2, 3));
  EXPECT_EQ(RankText(s.ranks[0]),
            "0F0 0SEND_F0>1 0F1 0SEND_F1>1 0RECV_B0<1 0B0 0W0 0RECV_B1<1 0F2 0SEND_F2>1 0B1 0W1 0RECV_B2<1 0B2 0W2 "
            "0REDUCE_GRAD");
  EXPECT_EQ(RankText(s.ranks[1]),
            "1RECV_F0<0 1RECV_F1<0 1F0 1B0 1SEND_B0>0 1F1 1B1 1SEND_B1>0 1RECV_F2<0 1W0 1F2 1B2 1SEND_B2>0 1W1 1W2 "
            "1REDUCE_GRAD");
}

TEST(AddReduceGradsTest, InterleavedReducesTheLaterChunkFirst) {
  const Schedule s = MustBuild("interleaved", Spec(2, 4, 2));
  EXPECT_EQ(RankText(s.ranks[0]),
            "0F0 0SEND_F0>1 0F1 0SEND_F1>1 2RECV_F0<1 2F0 2SEND_F0>1 2RECV_F1<1 2F1 2SEND_F1>1 0F2 0SEND_F2>1 "
            "2RECV_B0<1 2BW0 2SEND_B0>1 0F3 0SEND_F3>1 2RECV_B1<1 2RECV_F2<1 2BW1 2SEND_B1>1 2F2 2SEND_F2>1 "
            "0RECV_B0<1 2RECV_F3<1 0BW0 2F3 2SEND_F3>1 0RECV_B1<1 0BW1 2RECV_B2<1 2BW2 2SEND_B2>1 2RECV_B3<1 2BW3 "
            "2SEND_B3>1 2REDUCE_GRAD 0RECV_B2<1 0BW2 0RECV_B3<1 0BW3 0REDUCE_GRAD");
  EXPECT_EQ(RankText(s.ranks[1]),
            "1RECV_F0<0 1RECV_F1<0 1F0 1SEND_F0>0 3RECV_F0<0 1F1 1SEND_F1>0 3RECV_F1<0 3F0 1RECV_F2<0 3BW0 "
            "3SEND_B0>0 3F1 1RECV_B0<0 1RECV_F3<0 3BW1 3SEND_B1>0 1F2 1SEND_F2>0 1RECV_B1<0 3RECV_F2<0 1BW0 "
            "1SEND_B0>0 1F3 1SEND_F3>0 3RECV_F3<0 1BW1 1SEND_B1>0 3F2 3BW2 3SEND_B2>0 3F3 1RECV_B2<0 3BW3 "
            "3SEND_B3>0 3REDUCE_GRAD 1RECV_B3<0 1BW2 1SEND_B2>0 1BW3 1SEND_B3>0 1REDUCE_GRAD");
}

TEST(AddReduceGradsTest, EveryFamilyValidatesWithOneReductionPerStage) {
  for (const ScheduleInfo& info : AllSchedules()) {
    if (std::string(info.name) == "csv") continue;
    ScheduleSpec spec = Spec(4, 8);
    auto s = BuildSchedule(info.name, [&] { spec.reduce_grads = true; return spec; }());
    ASSERT_TRUE(s.ok()) << info.name << ": " << s.status().ToString();
    int reductions = 0;
    for (const auto& list : s->ranks) {
      for (const Action& a : list) reductions += a.op == Op::kReduceGrad;
    }
    EXPECT_EQ(reductions, s->num_stages()) << info.name;
  }
}

TEST(AddReduceGradsTest, KeepsAnImportedSchedulesOwn) {
  Schedule s = MakeSchedule("hand", 1, 1, 1, {0});
  s.ranks[0] = {A(Op::kF, 0, 0), A(Op::kB, 0, 0), A(Op::kReduceGrad, 0), A(Op::kW, 0, 0)};  // wrong, but its own
  EXPECT_EQ(AddReduceGrads(s).ranks, s.ranks);
  s.ranks[0].erase(s.ranks[0].begin() + 2);
  EXPECT_EQ(RankText(AddReduceGrads(s).ranks[0]), "0F0 0B0 0W0 0REDUCE_GRAD");
}

TEST(ReduceGradValidatorTest, OptFollowsTheReductionsOfItsRanksStages) {
  Schedule s = MakeSchedule("hand", 1, 2, 1, {0, 0});
  s.ranks[0] = {A(Op::kF, 0, 0), A(Op::kF, 1, 0), A(Op::kBW, 1, 0), A(Op::kReduceGrad, 1),
                A(Op::kBW, 0, 0), A(Op::kOpt, 0),   A(Op::kReduceGrad, 0)};
  EXPECT_EQ(Validate(s).message(),
            "rank 0, position 5 (0OPT): runs before 0REDUCE_GRAD at position 6; the optimizer step of a stage "
            "follows its REDUCE_GRAD");
  std::swap(s.ranks[0][5], s.ranks[0][6]);
  EXPECT_TRUE(Validate(s).ok()) << Validate(s).ToString();
}

// p 2 in a V (stages 0, 1, 2, 3 on ranks 0, 1, 1, 0), one micro-batch, f = b = w = 1 per rank's
// share (0.5 per stage), no comm, reduce_grad 2 per rank's share (1 per stage). Compute:
//   rank 0: 0F0 [0, .5]  3F0 [1.5, 2]  3B0 [2, 2.5]  3W0 [2.5, 3]  0B0 [4, 4.5]  0W0 [4.5, 5]
//   rank 1: 1F0 [.5, 1]  2F0 [1, 1.5]  2B0 [2.5, 3]  2W0 [3, 3.5]  1B0 [3.5, 4]  1W0 [4, 4.5]
// Stage by stage, each reduction right after its stage's last W: rank 0 reduces stage 3 over
// [3, 4] while it waits for 0B0, stage 0 over [5, 6]; rank 1 reduces stage 2 over [3.5, 4.5] and
// stage 1 over [4.5, 5.5]: the step ends at 6 (OPT of rank 0). After the step (both just before
// OPT): rank 0 reduces over [5, 7], the step ends at 7.
Schedule VByHand(bool stage_by_stage) {
  Schedule s = MakeSchedule("hand", 2, 2, 1, VPlacement(2));
  auto w = [](int st) { return A(Op::kW, st, 0); };
  s.ranks[0] = {A(Op::kF, 0, 0), A(Op::kF, 3, 0), A(Op::kB, 3, 0), w(3), A(Op::kB, 0, 0), w(0)};
  s.ranks[1] = {A(Op::kF, 1, 0), A(Op::kF, 2, 0), A(Op::kB, 2, 0), w(2), A(Op::kB, 1, 0), w(1)};
  if (stage_by_stage) {
    s = AddReduceGrads(std::move(s));
  } else {
    s.ranks[0].insert(s.ranks[0].end(), {A(Op::kReduceGrad, 3), A(Op::kReduceGrad, 0)});
    s.ranks[1].insert(s.ranks[1].end(), {A(Op::kReduceGrad, 2), A(Op::kReduceGrad, 1)});
  }
  for (auto& list : s.ranks) list.push_back(A(Op::kOpt, 0));
  return s;
}

TEST(ReduceGradSimulatorTest, AStagesReductionOverlapsTheRestOfTheCoolDown) {
  CostModel c;
  c.reduce_grad = 2;
  const Schedule by_stage = VByHand(true);
  ASSERT_TRUE(Validate(by_stage).ok()) << Validate(by_stage).ToString();
  EXPECT_EQ(RankText(by_stage.ranks[0]), "0F0 3F0 3B0 3W0 3REDUCE_GRAD 0B0 0W0 0REDUCE_GRAD 0OPT");
  const Simulation sim = testing::MustSimulate(by_stage, c);
  EXPECT_EQ(sim.makespan, 6);
  EXPECT_EQ(sim.timing[0][4].start, 3);  // 3REDUCE_GRAD, in the background
  EXPECT_EQ(sim.timing[0][4].end, 4);
  EXPECT_EQ(sim.timing[0][5].start, 4);  // 0B0 did not wait for it, only for its input
  EXPECT_EQ(sim.timing[0][7].start, 5);  // 0REDUCE_GRAD
  EXPECT_EQ(sim.timing[0][8].start, 6);  // OPT waits for the lane
  EXPECT_EQ(sim.timing[1][4].start, 3.5);
  EXPECT_EQ(sim.timing[1][7].end, 5.5);
  // Compute is unchanged, and so is the busy time; the reduction is idle in the bubble figures.
  EXPECT_EQ(sim.ranks[0].last_end, 5);
  EXPECT_EQ(sim.ranks[0].busy, 3);
  EXPECT_EQ(sim.bubble_rate, 1 - 6.0 / (2 * 6));

  const Schedule after_step = VByHand(false);
  ASSERT_TRUE(Validate(after_step).ok()) << Validate(after_step).ToString();
  EXPECT_EQ(testing::MustSimulate(after_step, c).makespan, 7);
  // Free reductions (the default) change nothing.
  EXPECT_EQ(testing::MustSimulate(by_stage, CostModel{}).makespan, 5);
  EXPECT_EQ(testing::MustSimulate(after_step, CostModel{}).makespan, 5);
}

// The simulated trace draws each rank's reductions on a track of their own (they overlap the
// rank's next actions): tid pp + rank.
TEST(ReduceGradSimulatorTest, TraceTrack) {
  CostModel c;
  c.reduce_grad = 2;
  const Schedule s = VByHand(true);
  const std::string text = ScheduleToTrace(s, testing::MustSimulate(s, c));
  EXPECT_NE(text.find("{\"ph\": \"M\", \"pid\": 0, \"tid\": 2, \"name\": \"thread_name\", \"args\": {\"name\": "
                      "\"rank 0 gradient all-reduce\"}}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("{\"name\": \"REDUCE_GRAD mb-1 s3\", \"cat\": \"other\", \"ph\": \"X\", \"ts\": 3000, "
                      "\"dur\": 1000, \"pid\": 0, \"tid\": 2,"),
            std::string::npos)
      << text;
  EXPECT_EQ(ScheduleToTrace(VByHand(false), testing::MustSimulate(VByHand(false), c)).find("tid\": 4"), std::string::npos);
}

// Reductions on one rank run one at a time: two launched back to back queue on the lane, and a
// rank's step without OPT (an imported CSV) still ends when its lane is done.
TEST(ReduceGradSimulatorTest, OneLanePerRank) {
  Schedule s = MakeSchedule("hand", 1, 2, 1, {0, 0});
  s.ranks[0] = {A(Op::kF, 0, 0), A(Op::kF, 1, 0), A(Op::kBW, 1, 0), A(Op::kBW, 0, 0),
                A(Op::kReduceGrad, 1), A(Op::kReduceGrad, 0)};
  CostModel c;
  c.reduce_grad = 3;  // 1.5 per stage
  const Simulation sim = testing::MustSimulate(s, c);
  EXPECT_EQ(sim.timing[0][4].start, 3);
  EXPECT_EQ(sim.timing[0][5].start, 4.5);
  EXPECT_EQ(sim.makespan, 6);
}

}  // namespace
}  // namespace pipecoord::schedules
