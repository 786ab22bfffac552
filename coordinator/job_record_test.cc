#include "coordinator/job_record.h"

#include <gtest/gtest.h>

namespace pipecoord::coordinator {
namespace {

JobRecord Record(int pp, int dp) {
  JobRecord j;
  j.job.mutable_spec()->set_pp(pp);
  j.job.mutable_spec()->set_dp(dp);
  j.job.mutable_spec()->set_steps(10);
  j.job.set_state(v1::PENDING);
  j.last_checkpoint.assign(j.world(), -1);
  j.ResetAttempt(0);
  return j;
}

TEST(JobRecordTest, TheRestartPointIsTheStepEveryRankCheckpointed) {
  JobRecord j = Record(2, 2);
  EXPECT_FALSE(j.NoteCheckpoint(0, 3));
  EXPECT_FALSE(j.NoteCheckpoint(1, 3));
  EXPECT_FALSE(j.NoteCheckpoint(2, 1));
  EXPECT_EQ(j.job.checkpointed_steps(), 0);
  EXPECT_TRUE(j.NoteCheckpoint(3, 5));  // every rank has step 1 at least
  EXPECT_EQ(j.job.checkpointed_steps(), 2);
  EXPECT_FALSE(j.NoteCheckpoint(3, 2));  // an older checkpoint changes nothing
  EXPECT_TRUE(j.NoteCheckpoint(2, 4));
  EXPECT_EQ(j.job.checkpointed_steps(), 4);
}

TEST(JobRecordTest, TheTraceKeepsTheNewestActions) {
  JobRecord j = Record(1, 1);
  for (int i = 0; i < 9; ++i) {
    v1::ActionTiming t;
    t.set_step(i);
    j.KeepAction(t, i % 2, 4);
  }
  // Full at 4: halves to 2, then grows again; the newest always kept.
  ASSERT_EQ(j.actions.size(), 3u);
  EXPECT_EQ(j.actions.back().step(), 8);
  EXPECT_EQ(j.action_rank.back(), 0);
  EXPECT_EQ(j.action_rank.size(), j.actions.size());
  j.TrimActions(2);
  ASSERT_EQ(j.actions.size(), 2u);
  EXPECT_EQ(j.actions.front().step(), 7);
  EXPECT_EQ(j.action_rank.front(), 1);
}

TEST(JobRecordTest, AStepUpdateCarriesTheMeasurementAndThePrediction) {
  JobRecord j = Record(1, 1);
  j.job.set_state(v1::RUNNING);
  j.job.mutable_plan()->set_predicted_bubble_rate(0.25);
  v1::StepRecord rec;
  rec.set_step(3);
  rec.set_loss(1.5);
  rec.set_step_time_s(0.2);
  rec.set_measured_bubble_rate(0.3);
  v1::JobUpdate u = j.StepUpdate(rec);
  EXPECT_EQ(u.state(), v1::RUNNING);
  EXPECT_EQ(u.step(), 3);
  EXPECT_EQ(u.loss(), 1.5);
  EXPECT_EQ(u.step_time_s(), 0.2);
  EXPECT_EQ(u.measured_bubble_rate(), 0.3);
  EXPECT_EQ(u.predicted_bubble_rate(), 0.25);  // a record without its own prediction: the plan's
  rec.set_predicted_step_s(0.19);
  rec.set_predicted_bubble_rate(0.28);  // calibrated
  EXPECT_EQ(j.StepUpdate(rec).predicted_bubble_rate(), 0.28);
  EXPECT_FALSE(j.terminal());
  j.job.set_state(v1::CANCELLED);
  EXPECT_TRUE(j.terminal());
}

TEST(JobRecordTest, ANewAttemptForgetsTheLastOnesProgress) {
  JobRecord j = Record(1, 2);
  v1::TelemetryBatch b;
  b.add_steps()->set_step(0);
  j.order.Accept(1, b);
  EXPECT_TRUE(j.measuring.Add(0, b).empty());
  EXPECT_FALSE(j.outcome.Succeeded(0));  // rank 1 has not finished
  j.ResetAttempt(4);
  EXPECT_TRUE(j.order.MeasuredNothing());
  EXPECT_EQ(j.order.open_step(1), 4);
  EXPECT_EQ(j.measuring.open_steps(), 0u);
  EXPECT_FALSE(j.outcome.reported(0));
}

}  // namespace
}  // namespace pipecoord::coordinator
