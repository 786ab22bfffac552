#include "coordinator/telemetry_order.h"

#include <gtest/gtest.h>

namespace pipecoord::coordinator {
namespace {

// Rank `rank` (dp `dp`): `actions` timings of `step`, then its summary when `summarize`.
v1::TelemetryBatch Batch(int rank, int dp, int step, int actions, bool summarize) {
  v1::TelemetryBatch b;
  b.set_rank(rank);
  b.set_dp_rank(dp);
  for (int i = 0; i < actions; ++i) {
    auto* t = b.add_actions();
    t->set_step(step);
    t->set_start_ns(10 * i);
    t->set_end_ns(10 * i + 5);
  }
  if (summarize) b.add_steps()->set_step(step);
  return b;
}

constexpr int kSteps = 4, kList = 3;

TEST(TelemetryOrderTest, StepsComeInOrderEachOnce) {
  TelemetryOrder order(2, 0);
  ASSERT_TRUE(order.Check(0, Batch(0, 0, 0, 3, true), kSteps, kList).ok());
  order.Accept(0, Batch(0, 0, 0, 3, true));
  EXPECT_EQ(order.open_step(0), 1);
  EXPECT_EQ(order.open_step(1), 0);  // each rank has its own order
  Status again = order.Check(0, Batch(0, 0, 0, 1, false), kSteps, kList);
  EXPECT_EQ(again.code(), Code::kInvalidArgument);
  EXPECT_EQ(again.message(), "actions: rank 0 (dp 0) reports step 1 now (steps in order, each once), got step 0");
  EXPECT_EQ(order.Check(0, Batch(0, 0, 0, 0, true), kSteps, kList).message(),
            "steps: rank 0 (dp 0) reports step 1 now (steps in order, each once), got step 0");
  EXPECT_EQ(order.Check(1, Batch(1, 0, 2, 0, true), kSteps, kList).message(),
            "steps: rank 1 (dp 0) reports step 0 now (steps in order, each once), got step 2");
}

// Found by fuzz/telemetry_fuzz (CI's seed): a wait_peer of 2^31 - 1 overflowed the bubble check's
// rank arithmetic. The rank waited for is a pipeline rank of the job, or -1.
TEST(TelemetryOrderTest, WaitPeerIsAPipelineRankOrNone) {
  TelemetryOrder order(2, 0, /*pp=*/2);
  v1::TelemetryBatch b = Batch(0, 0, 0, 2, true);
  b.mutable_actions(0)->set_wait_peer(-1);
  b.mutable_actions(1)->set_wait_peer(1);
  EXPECT_TRUE(order.Check(0, b, kSteps, kList).ok());
  b.mutable_actions(1)->set_wait_peer(2147483647);
  Status st = order.Check(0, b, kSteps, kList);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "actions: wait_peer must be in -1..1, got 2147483647");
  b.mutable_actions(1)->set_wait_peer(-2);
  EXPECT_EQ(order.Check(0, b, kSteps, kList).message(), "actions: wait_peer must be in -1..1, got -2");
}

TEST(TelemetryOrderTest, ABatchMaySummarizeSeveralStepsInARow) {
  TelemetryOrder order(1, 0);
  v1::TelemetryBatch b = Batch(0, 0, 0, 0, true);
  b.add_steps()->set_step(1);
  ASSERT_TRUE(order.Check(0, b, kSteps, kList).ok());
  order.Accept(0, b);
  EXPECT_EQ(order.open_step(0), 2);
  b.mutable_steps(1)->set_step(3);  // 2 and 3 would be in order; 2 then 3 skipped is not
  b.mutable_steps(0)->set_step(2);
  EXPECT_TRUE(order.Check(0, b, kSteps, kList).ok());
  b.mutable_steps(1)->set_step(2);
  EXPECT_EQ(order.Check(0, b, kSteps, kList).message(),
            "steps: rank 0 (dp 0) reports step 3 now (steps in order, each once), got step 2");
}

TEST(TelemetryOrderTest, AStepHoldsAtMostTheJobListsActionsOverSeveralBatches) {
  TelemetryOrder order(1, 0);
  ASSERT_TRUE(order.Check(0, Batch(0, 0, 0, 2, false), kSteps, kList).ok());
  order.Accept(0, Batch(0, 0, 0, 2, false));
  EXPECT_FALSE(order.MeasuredNothing());
  EXPECT_EQ(order.open_step(0), 0);  // actions alone do not close the step
  Status st = order.Check(0, Batch(0, 1, 0, 2, true), kSteps, kList);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "actions: rank 0 (dp 1) sent 4 for step 0, its job list has 3");
  ASSERT_TRUE(order.Check(0, Batch(0, 0, 0, 1, true), kSteps, kList).ok());
  order.Accept(0, Batch(0, 0, 0, 1, true));
  // The next step starts from zero actions.
  EXPECT_TRUE(order.Check(0, Batch(0, 0, 1, 3, false), kSteps, kList).ok());
}

TEST(TelemetryOrderTest, StepsTimesAndCheckpointsMustBeInRange) {
  TelemetryOrder order(1, 0);
  EXPECT_EQ(order.Check(0, Batch(0, 0, kSteps, 1, false), kSteps, kList).message(),
            "actions: step must be in 0..3, got 4");
  EXPECT_EQ(order.Check(0, Batch(0, 0, -1, 0, true), kSteps, kList).message(), "steps: step must be in 0..3, got -1");
  v1::TelemetryBatch backwards = Batch(0, 0, 0, 1, false);
  backwards.mutable_actions(0)->set_end_ns(-1);
  EXPECT_EQ(order.Check(0, backwards, kSteps, kList).message(), "actions: need 0 <= start_ns <= end_ns, got 0 and -1");
  v1::TelemetryBatch future = Batch(0, 0, 0, 0, true);
  future.mutable_steps(0)->add_checkpointed_steps(1);
  EXPECT_EQ(order.Check(0, future, kSteps, kList).message(),
            "steps[0].checkpointed_steps: must be in 0..0 (steps finished by the summary's step), got 1");
  future.mutable_steps(0)->set_checkpointed_steps(0, 0);
  EXPECT_TRUE(order.Check(0, future, kSteps, kList).ok());
  EXPECT_TRUE(order.MeasuredNothing());  // Check changes nothing
}

TEST(TelemetryOrderTest, AnAttemptFromACheckpointStartsThere) {
  TelemetryOrder order(2, 2);
  EXPECT_TRUE(order.MeasuredNothing());
  EXPECT_EQ(order.open_step(1), 2);
  EXPECT_EQ(order.Check(1, Batch(1, 0, 0, 0, true), kSteps, kList).message(),
            "steps: rank 1 (dp 0) reports step 2 now (steps in order, each once), got step 0");
  order.Accept(1, Batch(1, 0, 2, 0, true));
  EXPECT_FALSE(order.MeasuredNothing());
  EXPECT_EQ(order.open_step(1), 3);
}

// Folded actions (ActionTotals) count toward the job list like whole ones; a totals entry out of
// its rank's order or with impossible times is refused naming it.
TEST(TelemetryOrderTest, FoldedActionsCountTowardTheListAndAreChecked) {
  TelemetryOrder order(1, 0);
  v1::TelemetryBatch b = Batch(0, 0, 0, 1, false);
  auto* k = b.add_totals();
  k->set_step(0);
  k->set_count(2);
  k->set_first_start_ns(10);
  k->set_last_end_ns(30);
  k->set_busy_ns(15);
  k->set_fastest_ns(5);
  EXPECT_EQ(TimedActions(b), 3);
  ASSERT_TRUE(order.Check(0, b, kSteps, kList).ok());
  k->set_count(3);
  EXPECT_EQ(order.Check(0, b, kSteps, kList).message(), "actions: rank 0 (dp 0) sent 4 for step 0, its job list has 3");
  k->set_count(0);
  EXPECT_EQ(order.Check(0, b, kSteps, kList).message(), "totals[0].count: must be at least 1, got 0");
  k->set_count(2);
  k->set_step(1);
  EXPECT_EQ(order.Check(0, b, kSteps, kList).message(),
            "totals[0].step: rank 0 (dp 0) reports step 0 now (steps in order, each once), got step 1");
  k->set_step(0);
  k->set_last_end_ns(5);
  EXPECT_EQ(order.Check(0, b, kSteps, kList).message(),
            "totals[0]: need 0 <= first_start_ns <= last_end_ns, got 10 and 5");
  k->set_last_end_ns(30);
  k->set_fastest_ns(20);
  EXPECT_EQ(order.Check(0, b, kSteps, kList).message(), "totals[0]: need 0 <= fastest_ns <= busy_ns, got 20 and 15");
  k->set_fastest_ns(5);
  order.Accept(0, b);
  EXPECT_EQ(order.Check(0, Batch(0, 0, 0, 1, true), kSteps, kList).message(),
            "actions: rank 0 (dp 0) sent 4 for step 0, its job list has 3");
  EXPECT_TRUE(order.Check(0, Batch(0, 0, 0, 0, true), kSteps, kList).ok());
}

}  // namespace
}  // namespace pipecoord::coordinator
