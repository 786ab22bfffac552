// JobMonitor's dashboard timeline: every rank's recent actions in a small job; in a job of more
// than kPerRankSeriesMaxRanks ranks, the first replica's pipeline only (health::InTimeline).
#include "coordinator/health/job_monitor.h"

#include <gtest/gtest.h>

#include <set>

#include "jobplan/layout.h"
#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "jobplan/test_spec.h"

namespace pipecoord::coordinator::health {
namespace {

// The timeline's ranks after one F of every rank at step 0.
std::set<int> TimelineRanks(int dp) {
  v1::Job job;
  job.set_id("job-000001");
  v1::JobSpec spec = jobplan::TestSpec("1f1b", 2);
  spec.set_dp(dp);
  *job.mutable_spec() = jobplan::WithDefaults(spec);
  auto plan = jobplan::PlanJob(job.spec());
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  *job.mutable_plan() = *plan;
  JobMonitor monitor(job, nullptr);
  const RankLayout layout = jobplan::LayoutOf(job.spec());
  for (int g = 0; g < layout.world(); ++g) {
    v1::TelemetryBatch b;
    v1::ActionTiming* t = b.add_actions();
    t->set_step(0);
    t->mutable_action()->set_op(v1::F);
    t->mutable_action()->set_stage(layout.PipelineRank(g));
    t->set_start_ns(1000 * g);
    t->set_end_ns(1000 * g + 500);
    monitor.OnBatch(g, b, 0);
  }
  const HealthSnapshot s = monitor.Snapshot();
  EXPECT_EQ(s.recent.size(), s.recent_rank.size());
  return std::set<int>(s.recent_rank.begin(), s.recent_rank.end());
}

TEST(JobMonitorTest, TheTimelineHoldsEveryRankOfASmallJob) {
  EXPECT_EQ(TimelineRanks(4), (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(JobMonitorTest, TheTimelineOfABigJobIsItsFirstReplicasPipeline) {
  const int dp = kPerRankSeriesMaxRanks;  // pp 2: twice the limit
  const std::set<int> shown = TimelineRanks(dp);
  const RankLayout layout = RankLayout::OfDegrees(2, dp, 1);
  std::set<int> want;
  for (int g = 0; g < layout.world(); ++g) {
    if (layout.DataRank(g) == 0) want.insert(g);
  }
  EXPECT_EQ(want.size(), 2u);
  EXPECT_EQ(shown, want);
}

}  // namespace
}  // namespace pipecoord::coordinator::health
