#include "coordinator/step_aggregator.h"

#include <gtest/gtest.h>

namespace pipecoord::coordinator {
namespace {

void AddAction(v1::TelemetryBatch* b, v1::Op op, int step, int64_t start_ns, int64_t end_ns) {
  auto* t = b->add_actions();
  t->mutable_action()->set_op(op);
  t->set_step(step);
  t->set_start_ns(start_ns);
  t->set_end_ns(end_ns);
}

v1::StepSummary* AddSummary(v1::TelemetryBatch* b, int step, uint64_t peak) {
  auto* s = b->add_steps();
  s->set_step(step);
  s->set_memory_peak_bytes(peak);
  return s;
}

void SetLoss(v1::StepSummary* s, double loss) {
  s->set_loss(loss);
  s->set_has_loss(true);
}

TEST(StepAggregatorTest, AStepIsMeasuredOnceEveryRankSummarizedIt) {
  StepAggregator agg(2);
  // Rank 0: F 1000..2000, B 3000..5000, a send in between (not compute).
  v1::TelemetryBatch r0;
  AddAction(&r0, v1::F, 0, 1000, 2000);
  AddAction(&r0, v1::SEND_F, 0, 2000, 2500);
  AddAction(&r0, v1::B, 0, 3000, 5000);
  AddSummary(&r0, 0, 700);
  EXPECT_TRUE(agg.Add(0, r0).empty());
  EXPECT_EQ(agg.open_steps(), 1u);
  // Rank 1: F 2000..2500, W 5000..6000 and BW 6000..7000; it holds the loss.
  v1::TelemetryBatch r1;
  AddAction(&r1, v1::F, 0, 2000, 2500);
  AddAction(&r1, v1::W, 0, 5000, 6000);
  AddAction(&r1, v1::BW, 0, 6000, 7000);
  SetLoss(AddSummary(&r1, 0, 900), 3.25);
  std::vector<v1::StepRecord> done = agg.Add(1, r1);
  ASSERT_EQ(done.size(), 1u);
  const v1::StepRecord& rec = done[0];
  EXPECT_EQ(rec.step(), 0);
  EXPECT_DOUBLE_EQ(rec.step_time_s(), 6000e-9);  // 1000 .. 7000 ns
  // Busy: 1000 + 2000 on rank 0, 500 + 1000 + 1000 on rank 1, over 2 ranks x 6000 ns.
  EXPECT_DOUBLE_EQ(rec.measured_bubble_rate(), 1 - 5500.0 / 12000.0);
  EXPECT_EQ(rec.loss(), 3.25);
  ASSERT_EQ(rec.peak_memory_bytes_size(), 2);
  EXPECT_EQ(rec.peak_memory_bytes(0), 700u);
  EXPECT_EQ(rec.peak_memory_bytes(1), 900u);
  EXPECT_EQ(agg.open_steps(), 0u);  // measured and forgotten
}

TEST(StepAggregatorTest, TheLossIsTheMeanOfTheRanksThatReportedOne) {
  StepAggregator agg(3);  // e.g. dp 2: two last stages report a loss, the first stage none
  v1::TelemetryBatch b0, b1, b2;
  SetLoss(AddSummary(&b0, 0, 1), 2.0);
  AddSummary(&b1, 0, 1);
  SetLoss(AddSummary(&b2, 0, 1), 3.0);
  EXPECT_TRUE(agg.Add(0, b0).empty());
  EXPECT_TRUE(agg.Add(1, b1).empty());
  std::vector<v1::StepRecord> done = agg.Add(2, b2);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].loss(), 2.5);
  // No loss and no actions: zero loss, zero time, zero bubble.
  StepAggregator none(1);
  v1::TelemetryBatch quiet;
  AddSummary(&quiet, 4, 0);
  done = none.Add(0, quiet);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].step(), 4);
  EXPECT_EQ(done[0].loss(), 0);
  EXPECT_EQ(done[0].step_time_s(), 0);
  EXPECT_EQ(done[0].measured_bubble_rate(), 0);
}

// Four reports (dp 2 x tp 2 head ranks) whose floating-point sum depends on the order of the
// additions: arriving in any order, the step's loss is the sum in global rank order / 4.
TEST(StepAggregatorTest, TheLossDoesNotDependOnTheOrderTheReportsArrive) {
  const double loss[4] = {1e16, 1.0, -1e16, 1.0};
  const double in_rank_order = (((loss[0] + loss[1]) + loss[2]) + loss[3]) / 4;
  const double reversed = (((loss[3] + loss[2]) + loss[1]) + loss[0]) / 4;
  ASSERT_NE(in_rank_order, reversed);  // the case is one where the order matters
  for (const std::vector<int>& order : {std::vector<int>{0, 1, 2, 3}, {3, 2, 1, 0}, {2, 0, 3, 1}}) {
    StepAggregator agg(4);
    std::vector<v1::StepRecord> done;
    for (int g : order) {
      v1::TelemetryBatch b;
      SetLoss(AddSummary(&b, 0, 1), loss[g]);
      done = agg.Add(g, b);
    }
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].loss(), in_rank_order);
  }
}

TEST(StepAggregatorTest, PartialStepsWaitAndOneBatchMayCompleteSeveral) {
  StepAggregator agg(2);
  // Rank 0 sends step 0's actions, then its summaries of steps 0 and 1 in one batch.
  v1::TelemetryBatch a0;
  AddAction(&a0, v1::F, 0, 0, 100);
  EXPECT_TRUE(agg.Add(0, a0).empty());
  v1::TelemetryBatch s0;
  AddSummary(&s0, 0, 10);
  AddAction(&s0, v1::F, 1, 1000, 1400);
  AddSummary(&s0, 1, 11);
  EXPECT_TRUE(agg.Add(0, s0).empty());
  EXPECT_EQ(agg.open_steps(), 2u);
  // Rank 1 reports both steps: both are measured, in order.
  v1::TelemetryBatch r1;
  AddAction(&r1, v1::B, 0, 100, 300);
  AddSummary(&r1, 0, 20);
  AddAction(&r1, v1::B, 1, 1400, 1800);
  AddSummary(&r1, 1, 21);
  std::vector<v1::StepRecord> done = agg.Add(1, r1);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].step(), 0);
  EXPECT_DOUBLE_EQ(done[0].step_time_s(), 300e-9);
  EXPECT_DOUBLE_EQ(done[0].measured_bubble_rate(), 1 - 300.0 / 600.0);
  EXPECT_EQ(done[1].step(), 1);
  EXPECT_DOUBLE_EQ(done[1].step_time_s(), 800e-9);
  EXPECT_DOUBLE_EQ(done[1].measured_bubble_rate(), 0.5);
  EXPECT_EQ(done[1].peak_memory_bytes(0), 11u);
  EXPECT_EQ(done[1].peak_memory_bytes(1), 21u);
  // A rank ahead of the others leaves its step open.
  v1::TelemetryBatch ahead;
  AddAction(&ahead, v1::F, 2, 2000, 2100);
  AddSummary(&ahead, 2, 12);
  EXPECT_TRUE(agg.Add(0, ahead).empty());
  EXPECT_EQ(agg.open_steps(), 1u);
}

TEST(StepAggregatorTest, BusyTimesBeyondInt64DoNotOverflow) {
  StepAggregator agg(2);
  const int64_t long_ns = 9'000'000'000'000'000'000;  // two of these add up past INT64_MAX
  std::vector<v1::StepRecord> done;
  for (int g = 0; g < 2; ++g) {
    v1::TelemetryBatch b;
    AddAction(&b, v1::F, 0, 0, long_ns);
    AddSummary(&b, 0, 0);
    done = agg.Add(g, b);
  }
  ASSERT_EQ(done.size(), 1u);
  EXPECT_DOUBLE_EQ(done[0].step_time_s(), 9e9);
  EXPECT_NEAR(done[0].measured_bubble_rate(), 0, 1e-12);
}

TEST(StepAggregatorTest, HandsBackEachCompletedStepsActionsByGlobalRank) {
  StepAggregator agg(2);
  std::vector<jobplan::StepActions> actions;
  v1::TelemetryBatch r1;
  AddAction(&r1, v1::F, 0, 300, 400);
  AddAction(&r1, v1::B, 0, 400, 600);
  AddSummary(&r1, 0, 1);
  EXPECT_TRUE(agg.Add(1, r1, &actions).empty());
  EXPECT_TRUE(actions.empty());
  v1::TelemetryBatch r0;
  AddAction(&r0, v1::F, 0, 100, 200);
  AddSummary(&r0, 0, 1);
  ASSERT_EQ(agg.Add(0, r0, &actions).size(), 1u);
  ASSERT_EQ(actions.size(), 1u);
  ASSERT_EQ(actions[0].size(), 2u);
  ASSERT_EQ(actions[0][0].size(), 1u);
  EXPECT_EQ(actions[0][0][0].start_ns(), 100);
  ASSERT_EQ(actions[0][1].size(), 2u);
  EXPECT_EQ(actions[0][1][1].action().op(), v1::B);
  EXPECT_EQ(actions[0][1][1].end_ns(), 600);
}

TEST(StepAggregatorTest, TheValidationLossIsTheMeanOverReplicasWhenAnyReportedOne) {
  StepAggregator agg(2);  // pp 1 x dp 2: each replica's rank holds the head
  v1::TelemetryBatch a, b;
  v1::StepSummary* sa = AddSummary(&a, 3, 1);
  sa->set_val_loss(2.0);
  sa->set_has_val_loss(true);
  v1::StepSummary* sb = AddSummary(&b, 3, 1);
  sb->set_val_loss(3.0);
  sb->set_has_val_loss(true);
  AddSummary(&a, 4, 1);  // a step without validation
  AddSummary(&b, 4, 1);
  EXPECT_TRUE(agg.Add(0, a).empty());
  std::vector<v1::StepRecord> done = agg.Add(1, b);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_TRUE(done[0].has_val_loss());
  EXPECT_EQ(done[0].val_loss(), 2.5);
  EXPECT_FALSE(done[1].has_val_loss());
}

// The first test's step with rank 1's actions folded by kind (ActionTotals) as a worker folds
// them: the same step time and bubble rate (by the formula above), and no actions to calibrate on.
TEST(StepAggregatorTest, AFoldedRankCountsAsItsActionsAndTheStepHasNoActions) {
  StepAggregator agg(2);
  v1::TelemetryBatch r0;
  AddAction(&r0, v1::F, 0, 1000, 2000);
  AddAction(&r0, v1::SEND_F, 0, 2000, 2500);
  AddAction(&r0, v1::B, 0, 3000, 5000);
  AddSummary(&r0, 0, 700);
  EXPECT_TRUE(agg.Add(0, r0).empty());
  v1::TelemetryBatch r1;
  auto* f = r1.add_totals();
  f->set_step(0);
  f->set_op(v1::F);
  f->set_count(1);
  f->set_first_start_ns(2000);
  f->set_last_end_ns(2500);
  f->set_busy_ns(500);
  auto* w = r1.add_totals();  // W and BW are both compute: one kind each
  w->set_step(0);
  w->set_op(v1::W);
  w->set_count(1);
  w->set_first_start_ns(5000);
  w->set_last_end_ns(6000);
  w->set_busy_ns(1000);
  auto* bw = r1.add_totals();
  bw->set_step(0);
  bw->set_op(v1::BW);
  bw->set_count(1);
  bw->set_first_start_ns(6000);
  bw->set_last_end_ns(7000);
  bw->set_busy_ns(1000);
  AddSummary(&r1, 0, 900);
  std::vector<jobplan::StepActions> actions;
  std::vector<v1::StepRecord> done = agg.Add(1, r1, &actions);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_DOUBLE_EQ(done[0].step_time_s(), 6000e-9);
  EXPECT_DOUBLE_EQ(done[0].measured_bubble_rate(), 1 - 5500.0 / 12000.0);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_TRUE(actions[0].empty());
}

// tp 2 with rank 0 of each group speaking: a silent rank counts as its speaker (busy time and
// actions); a step whose speaker sent nothing (lost) hands back its group's actions empty.
TEST(StepAggregatorTest, ASilentShardCountsAsItsGroupsSpeaker) {
  StepAggregator agg(4, /*tp_speaker=*/2);
  for (int step = 0; step < 2; ++step) {
    std::vector<jobplan::StepActions> actions;
    std::vector<v1::StepRecord> done;
    for (int g = 0; g < 4; ++g) {
      v1::TelemetryBatch b;
      const bool speaks = g % 2 == 0 && !(step == 1 && g == 2);  // step 1: rank 2 lost
      if (speaks) AddAction(&b, v1::F, step, 1000 * g, 1000 * g + 500);
      AddSummary(&b, step, 100 + g);
      done = agg.Add(g, b, &actions);
    }
    ASSERT_EQ(done.size(), 1u);
    ASSERT_EQ(actions.size(), 1u);
    ASSERT_EQ(actions[0].size(), 4u);
    if (step == 0) {
      // 4 ranks busy 500 ns each over 0 .. 2500 ns.
      EXPECT_DOUBLE_EQ(done[0].measured_bubble_rate(), 1 - 2000.0 / (4 * 2500.0));
      ASSERT_EQ(actions[0][1].size(), 1u);
      EXPECT_EQ(actions[0][1][0].SerializeAsString(), actions[0][0][0].SerializeAsString());
      EXPECT_EQ(actions[0][3][0].start_ns(), 2000);
    } else {
      EXPECT_EQ(actions[0][1].size(), 1u);
      EXPECT_TRUE(actions[0][2].empty());
      EXPECT_TRUE(actions[0][3].empty());
    }
    EXPECT_EQ(done[0].peak_memory_bytes(3), 103u);  // memory stays per rank
  }
}

}  // namespace
}  // namespace pipecoord::coordinator
