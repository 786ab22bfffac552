// PyTorch pipelining's newer actions (torch/distributed/pipelining/schedules.py): OVERLAP_F_B,
// UNSHARD, RESHARD and REDUCE_GRAD through the CSV import and export, the validator's rules, the
// communication pass and the simulator.
#include <gtest/gtest.h>

#include <string>

#include "schedules/comm_pass.h"
#include "schedules/csv_format.h"
#include "schedules/registry.h"
#include "schedules/simulator.h"
#include "schedules/test_util.h"
#include "schedules/validator.h"

namespace pipecoord::schedules {
namespace {

using testing::RankText;

Schedule MustParse(const std::string& csv) {
  auto s = ParseScheduleCsv(csv);
  EXPECT_TRUE(s.ok()) << csv << ": " << s.status().ToString();
  return s.ok() ? *s : Schedule{};
}

std::string CsvError(const std::string& csv) { return ParseScheduleCsv(csv).status().message(); }

// The file's schedule, validated; "" when it passes.
std::string Invalid(const std::string& csv) {
  auto s = ParseScheduleCsv(csv);
  if (!s.ok()) return "parse: " + s.status().message();
  return Validate(*s).message();
}

void ExpectSame(const Schedule& a, const Schedule& b) {
  EXPECT_EQ(a.pp, b.pp);
  EXPECT_EQ(a.vpp, b.vpp);
  EXPECT_EQ(a.microbatches, b.microbatches);
  EXPECT_EQ(a.stage_to_rank, b.stage_to_rank);
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (size_t r = 0; r < a.ranks.size(); ++r) EXPECT_EQ(a.ranks[r], b.ranks[r]) << "rank " << r;
}

// Every new action in one file: FSDP's UNSHARD/RESHARD around each stage's compute, a
// REDUCE_GRAD after each stage's last backward, and on rank 1 a forward overlapped with a full
// backward (PyTorch's letters: B is the full backward here, the file has no W).
constexpr char kAllActions[] =
    "0UNSHARD,0F0,0F1,0B0,0B1,0REDUCE_GRAD,0RESHARD\n"
    "1UNSHARD,1F0,(1F1;1B0)OVERLAP_F_B,1B1,1REDUCE_GRAD,1RESHARD\n";

TEST(PyTorchActionsTest, ImportReadsEveryNewAction) {
  const Schedule s = MustParse(kAllActions);
  EXPECT_EQ(s.pp, 2);
  EXPECT_EQ(s.microbatches, 2);
  EXPECT_EQ(RankText(s.ranks[1]), "1UNSHARD 1F0 1OVERLAP_F_B1 1F1 1BW0 1BW1 1REDUCE_GRAD 1RESHARD");
  EXPECT_EQ(s.ranks[1][0], (Action{Op::kUnshard, 1, -1, -1}));
  EXPECT_EQ(s.ranks[1][2], (Action{Op::kOverlapFB, 1, 1, -1}));
  EXPECT_TRUE(Validate(s).ok()) << Validate(s).ToString();
  // PyTorch's I inside the overlap: the input-gradient backward, with its W elsewhere.
  const Schedule split = MustParse("0F0,(0F1;0I0)OVERLAP_F_B,0W0,0I1,0W1\n");
  EXPECT_EQ(RankText(split.ranks[0]), "0F0 0OVERLAP_F_B1 0F1 0B0 0W0 0B1 0W1");
  EXPECT_TRUE(Validate(split).ok()) << Validate(split).ToString();
  // Our dialect (W and no I: B is the input gradient) holds inside the parentheses too.
  EXPECT_EQ(RankText(MustParse("0F0,(0F1;0B0)OVERLAP_F_B,0W0,0B1,0W1\n").ranks[0]),
            "0F0 0OVERLAP_F_B1 0F1 0B0 0W0 0B1 0W1");
}

// import -> export -> import gives the same schedule, compute-only and with communication.
TEST(PyTorchActionsTest, CsvRoundTrips) {
  const Schedule first = MustParse(kAllActions);
  const std::string text = ScheduleToCsv(first);
  EXPECT_EQ(text, kAllActions);  // PyTorch's own form, cell for cell
  ExpectSame(first, MustParse(text));

  const Schedule split = MustParse("0F0,(0F1;0I0)OVERLAP_F_B,0W0,0I1,0W1,0REDUCE_GRAD\n");
  EXPECT_EQ(ScheduleToCsv(split), "0F0,(0F1;0I0)OVERLAP_F_B,0W0,0I1,0W1,0REDUCE_GRAD\n");
  ExpectSame(split, MustParse(ScheduleToCsv(split)));

  // With communication (PyTorch's compute_comms form): the slot's receives before it, its sends
  // after it; exported and read back the same.
  ScheduleSpec spec;
  spec.csv = kAllActions;
  auto built = BuildSchedule("csv", spec);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_EQ(RankText(built->ranks[1]),
            "1UNSHARD 1RECV_F0<0 1RECV_F1<0 1F0 1OVERLAP_F_B1 1F1 1BW0 1SEND_B0>0 1BW1 1SEND_B1>0 1REDUCE_GRAD "
            "1RESHARD");
  const std::string with_comm = ScheduleToCsv(*built);
  EXPECT_EQ(with_comm.substr(with_comm.find('\n') + 1),
            "1UNSHARD,1RECV_F0,1RECV_F1,1F0,(1F1;1B0)OVERLAP_F_B,1SEND_B0,1B1,1SEND_B1,1REDUCE_GRAD,1RESHARD\n");
  const Schedule back = MustParse(with_comm);
  ExpectSame(*built, back);
  EXPECT_TRUE(Validate(back).ok()) << Validate(back).ToString();
}

TEST(PyTorchActionsTest, CsvRefusesMalformedNewActions) {
  EXPECT_EQ(CsvError("0F0,0OVERLAP_F_B1\n"),
            "csv row 0 (rank 0), column 1 (\"0OVERLAP_F_B1\"): OVERLAP_F_B holds its two sub-actions: expected "
            "(<forward>;<backward>)OVERLAP_F_B, a forward then an I or B of this rank, e.g. "
            "\"(0F3;1B2)OVERLAP_F_B\"");
  const std::string shape =
      ": expected (<forward>;<backward>)OVERLAP_F_B, a forward then an I or B of this rank, e.g. "
      "\"(0F3;1B2)OVERLAP_F_B\"";
  EXPECT_EQ(CsvError("(0B0;0F1)OVERLAP_F_B\n"), "csv row 0 (rank 0), column 0 (\"(0B0;0F1)OVERLAP_F_B\")" + shape);
  EXPECT_EQ(CsvError("(0F1)OVERLAP_F_B\n"), "csv row 0 (rank 0), column 0 (\"(0F1)OVERLAP_F_B\")" + shape);
  EXPECT_EQ(CsvError("(0F1;0B0;0W0)OVERLAP_F_B\n"),
            "csv row 0 (rank 0), column 0 (\"(0F1;0B0;0W0)OVERLAP_F_B\")" + shape);
  EXPECT_EQ(CsvError("(0F1;0B0)F\n"), "csv row 0 (rank 0), column 0 (\"(0F1;0B0)F\")" + shape);
  EXPECT_EQ(CsvError("(0F1;0X0)OVERLAP_F_B\n"),
            "csv row 0 (rank 0), column 0 (\"(0F1;0X0)OVERLAP_F_B\"): unknown op \"X\" (expected F, I, B, W, BW, "
            "SEND_F, RECV_F, SEND_B, RECV_B, PROBE, OPT, OVERLAP_F_B, UNSHARD, RESHARD or REDUCE_GRAD)");
  EXPECT_EQ(CsvError("0F0,0UNSHARD0\n"),
            "csv row 0 (rank 0), column 1 (\"0UNSHARD0\"): UNSHARD takes no micro-batch, e.g. \"0UNSHARD\"");
  EXPECT_EQ(CsvError("0F0,0REDUCE_GRAD3\n"),
            "csv row 0 (rank 0), column 1 (\"0REDUCE_GRAD3\"): REDUCE_GRAD takes no micro-batch, e.g. "
            "\"0REDUCE_GRAD\"");
  // A stage's sub-action counts for the placement like any cell.
  EXPECT_EQ(CsvError("0F0,(1F0;0B0)OVERLAP_F_B\n1F1\n"),
            "csv row 1 (rank 1), column 0 (\"1F1\"): stage 1 is also in row 0 (column 1, \"(1F0;0B0)OVERLAP_F_B\"); a "
            "stage lives on one rank");
}

// ---- validator: each rule, named -------------------------------------------------------------

TEST(PyTorchActionsValidatorTest, ReduceGrad) {
  EXPECT_EQ(Invalid("0F0,0I0,0REDUCE_GRAD,0W0\n"),
            "rank 0, position 2 (0REDUCE_GRAD): runs before 0W0, the last weight gradient of stage 0, at position 3; "
            "REDUCE_GRAD comes after a stage's last W");
  EXPECT_EQ(Invalid("0F0,0F1,0B0,0REDUCE_GRAD,0B1\n"),
            "rank 0, position 3 (0REDUCE_GRAD): runs before 0BW1, the last weight gradient of stage 0, at position 4; "
            "REDUCE_GRAD comes after a stage's last W");
  EXPECT_EQ(Invalid("0F0,0B0,0REDUCE_GRAD,0REDUCE_GRAD\n"),
            "rank 0, position 3 (0REDUCE_GRAD): a second REDUCE_GRAD of stage 0 (the first is at rank 0, position 2 "
            "(0REDUCE_GRAD)); a stage's gradients are reduced once, after its last W");
  EXPECT_EQ(Invalid("0F0,0B0,0REDUCE_GRAD\n1F0,1B0\n"),
            "stage 1 has no REDUCE_GRAD, but stage 0 has one at rank 0, position 2 (0REDUCE_GRAD); with REDUCE_GRAD "
            "every stage reduces its gradients once, after its last W");
  EXPECT_EQ(Invalid("0F0,0B0,0REDUCE_GRAD\n1F0,1B0,1REDUCE_GRAD\n"), "");
}

TEST(PyTorchActionsValidatorTest, UnshardAndReshard) {
  EXPECT_EQ(Invalid("0F0,0UNSHARD,0B0,0RESHARD\n"),
            "rank 0, position 0 (0F0): runs while stage 0 is sharded; an UNSHARD of the stage must come before it (and "
            "its RESHARD after)");
  EXPECT_EQ(Invalid("0UNSHARD,0F0,0RESHARD,0B0\n"),
            "rank 0, position 3 (0BW0): runs while stage 0 is sharded; an UNSHARD of the stage must come before it "
            "(and its RESHARD after)");
  EXPECT_EQ(Invalid("0UNSHARD,0F0,0UNSHARD,0B0,0RESHARD\n"),
            "rank 0, position 2 (0UNSHARD): a second UNSHARD of stage 0, unsharded since position 0 with no RESHARD "
            "between");
  EXPECT_EQ(Invalid("0RESHARD,0F0,0B0\n"),
            "rank 0, position 0 (0RESHARD): RESHARD of stage 0, which no UNSHARD before it gathered");
  EXPECT_EQ(Invalid("0UNSHARD,0RESHARD,0UNSHARD,0F0,0B0,0RESHARD\n"),
            "rank 0, position 1 (0RESHARD): RESHARD of stage 0 with no compute of the stage since its UNSHARD at "
            "position 0 (the gather is waited for at the stage's first compute)");
  EXPECT_EQ(Invalid("0UNSHARD,0F0,0B0\n"),
            "rank 0, position 0 (0UNSHARD): stage 0 is left unsharded, no RESHARD after this UNSHARD");
  // Resharding between micro-batches and gathering again is fine (PyTorch's prefetch window
  // evicts and re-fetches); a stage with neither is simply not sharded.
  EXPECT_EQ(Invalid("0UNSHARD,0F0,0RESHARD,0UNSHARD,0B0,0RESHARD\n1F0,1B0\n"), "");
  // The stage's own rank only.
  EXPECT_EQ(Invalid("0F0,0B0,1UNSHARD\n1F0,1B0\n"), "parse: csv row 1 (rank 1), column 0 (\"1F0\"): stage 1 is "
                                                      "also in row 0 (column 2, \"1UNSHARD\"); a stage lives on one rank");
}

TEST(PyTorchActionsValidatorTest, OverlapFB) {
  EXPECT_EQ(Invalid("(0F0;0B0)OVERLAP_F_B\n"),
            "rank 0, position 0 (0OVERLAP_F_B0): its backward half 0BW0 needs its forward half 0F0, and the two run at "
            "once");
  // A cycle through another rank: rank 0's slot waits for rank 1's B0, which rank 1 runs after
  // F1, which needs the slot's own F1.
  EXPECT_EQ(Invalid("0F0,(0F1;0B0)OVERLAP_F_B,0B1\n1F0,1F1,1B0,1B1\n"),
            "deadlock: schedule cannot finish, an input is never produced: rank 0 waits at position 1 "
            "(0OVERLAP_F_B1); rank 1 waits at position 1 (1F1)");
  // The IR's rule: an OVERLAP_F_B is followed by its F, then the B or BW.
  Schedule s = MakeSchedule("hand", 1, 1, 2, {0});
  s.ranks[0] = {{Op::kF, 0, 0, -1}, {Op::kOverlapFB, 0, 1, -1}, {Op::kBW, 0, 0, -1}, {Op::kF, 0, 1, -1},
                {Op::kBW, 0, 1, -1}};
  EXPECT_EQ(Validate(s).message(),
            "rank 0, position 1 (0OVERLAP_F_B1): OVERLAP_F_B must be followed by the F it overlaps (0F1) and then "
            "the B or BW that runs with it, nothing in between");
  EXPECT_EQ(Simulate(s, CostModel{}).status().code(), Code::kInvalidArgument);  // never indexes past the list
  s.ranks[0] = {{Op::kF, 0, 0, -1}, {Op::kOverlapFB, 0, 1, -1}};
  EXPECT_FALSE(Validate(s).ok());
  s.ranks[0] = {{Op::kF, 0, 0, -1}, {Op::kBW, 0, 0, -1}, {Op::kReduceGrad, 0, 0, -1}};
  EXPECT_EQ(Validate(s).message(), "rank 0, position 2 (0REDUCE_GRAD0): REDUCE_GRAD takes no micro-batch (mb -1), got 0");
}

// ---- simulator: exact spans ------------------------------------------------------------------

// One rank, f = b = w = 1 (BW takes 2): F0, then F1 overlapped with BW0, then BW1. The slot lasts
// F + B - overlap x min(F, B): 3 (one after the other), 2.5 (half hidden), 2 (max).
TEST(PyTorchActionsSimulatorTest, OverlapSlotLastsSumToMax) {
  const Schedule s = MustParse("0F0,(0F1;0B0)OVERLAP_F_B,0B1\n");
  for (const auto& [overlap, makespan] : {std::pair{0.0, 6.0}, {0.5, 5.5}, {1.0, 5.0}}) {
    CostModel c;
    c.overlap = overlap;
    auto sim = Simulate(s, c);
    ASSERT_TRUE(sim.ok()) << sim.status().ToString();
    EXPECT_EQ(sim->makespan, makespan) << "overlap " << overlap;
    EXPECT_EQ(sim->ranks[0].busy, makespan);  // the slot counts once
    EXPECT_TRUE(sim->ranks[0].idle.empty());
  }
  CostModel c;
  c.overlap = 1;
  auto sim = Simulate(s, c);
  ASSERT_TRUE(sim.ok());
  // The slot [1, 3], split 1 : 2 between its halves; the marker at the slot's start.
  EXPECT_EQ(sim->timing[0][1].start, 1);
  EXPECT_EQ(sim->timing[0][1].end, 1);
  EXPECT_EQ(sim->timing[0][2].start, 1);
  EXPECT_DOUBLE_EQ(sim->timing[0][2].end, 1 + 2.0 / 3);
  EXPECT_DOUBLE_EQ(sim->timing[0][3].start, 1 + 2.0 / 3);
  EXPECT_EQ(sim->timing[0][3].end, 3);
  c.overlap = 1.5;
  EXPECT_EQ(Simulate(s, c).status().message(), "overlap: must be in [0, 1], got 1.5");
}

// Two ranks, comm 0.5: rank 1 overlaps F1 with BW0. Both halves wait for their inputs (F1 for
// rank 0's F1 at 2 + 0.5), both results leave when the slot ends. overlap 0: slot [2.5, 5.5],
// rank 1's BW1 [5.5, 7.5], rank 0's BW0 [6, 8] and BW1 [8, 10]: 10. overlap 1: slot [2.5, 4.5],
// BW1 [4.5, 6.5], rank 0's BW0 [5, 7], BW1 [7, 9]: 9.
TEST(PyTorchActionsSimulatorTest, OverlapAcrossRanksExactSpan) {
  ScheduleSpec spec;
  spec.csv = "0F0,0F1,0B0,0B1\n1F0,(1F1;1B0)OVERLAP_F_B,1B1\n";
  spec.costs.comm = 0.5;
  for (const auto& [overlap, makespan] : {std::pair{0.0, 10.0}, {1.0, 9.0}}) {
    spec.costs.overlap = overlap;
    auto s = BuildSchedule("csv", spec);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto sim = Simulate(*s, spec.costs);
    ASSERT_TRUE(sim.ok()) << sim.status().ToString();
    EXPECT_EQ(sim->makespan, makespan) << "overlap " << overlap;
    const auto& r1 = sim->ranks[1];
    EXPECT_EQ(r1.first_start, 1.5);
    EXPECT_EQ(r1.last_end, makespan - 2.5);
  }
}

// UNSHARD 0.5, RESHARD 0.25, REDUCE_GRAD 1 (one rank's whole share, one stage): UNSHARD and
// RESHARD hold the rank but run no layer, so they are idle time; REDUCE_GRAD runs in the
// background from where it stands (reduce_grads_test has its lane), so RESHARD runs beside it and
// the step ends with it: 0.5 + 3 + max(0.25, 1) = 4.5, busy 3.
TEST(PyTorchActionsSimulatorTest, NonComputeActionsHoldTheRank) {
  const Schedule s = MustParse("0UNSHARD,0F0,0I0,0W0,0REDUCE_GRAD,0RESHARD\n");
  ASSERT_TRUE(Validate(s).ok()) << Validate(s).ToString();
  auto free = Simulate(s, CostModel{});
  ASSERT_TRUE(free.ok());
  EXPECT_EQ(free->makespan, 3);  // 0 by default
  CostModel c;
  c.unshard = 0.5;
  c.reshard = 0.25;
  c.reduce_grad = 1;
  auto sim = Simulate(s, c);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  EXPECT_EQ(sim->makespan, 4.5);
  EXPECT_EQ(sim->ranks[0].busy, 3);
  ASSERT_EQ(sim->ranks[0].idle.size(), 2u);
  EXPECT_EQ(sim->ranks[0].idle[0].start, 0);
  EXPECT_EQ(sim->ranks[0].idle[0].end, 0.5);
  EXPECT_EQ(sim->ranks[0].idle[1].start, 3.5);
  EXPECT_EQ(sim->ranks[0].idle[1].end, 4.5);
  EXPECT_EQ(sim->timing[0][4].start, 3.5);  // REDUCE_GRAD after W
  EXPECT_EQ(sim->timing[0][4].end, 4.5);
  EXPECT_EQ(sim->timing[0][5].start, 3.5);  // RESHARD beside it
  EXPECT_EQ(sim->timing[0][5].end, 3.75);
  // A stage takes its fraction: two chunks per rank halve each action.
  const Schedule two = MustParse("0UNSHARD,1UNSHARD,0F0,1F0,1B0,0B0,0RESHARD,1RESHARD\n");
  ASSERT_TRUE(Validate(two).ok()) << Validate(two).ToString();
  EXPECT_EQ(Simulate(two, c)->makespan, 2 * (0.25 + 0.5 + 1 + 0.125));
  c.unshard = -1;
  EXPECT_EQ(Simulate(s, c).status().message(), "cost-unshard: must be a finite number >= 0, got -1");
}

}  // namespace
}  // namespace pipecoord::schedules
