// Schedule "best" in a JobSpec: resolved by WithDefaults into the winner (so the spec the
// coordinator stores, and `pipectl status`, name the schedule that runs), planned like it.
#include <gtest/gtest.h>

#include <string>

#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "jobplan/tiny_spec_for_tests.h"

namespace pipecoord::jobplan {
namespace {

// pp 4, 8 micro-batches, 8 layers (one per stage of a two-chunk schedule), costs 1/1/1/0.
v1::JobSpec BestSpec(double mem_limit = 0) {
  v1::JobSpec s = TinySpec(4, "best");
  s.set_microbatches(8);
  s.mutable_model()->set_layers(8);
  s.set_mem_limit(mem_limit);
  return s;
}

TEST(BestScheduleJobTest, ResolvedIntoTheWinnerAndPlannedLikeIt) {
  const v1::JobSpec raw = BestSpec();
  ASSERT_TRUE(ValidateJobSpec(raw).ok()) << ValidateJobSpec(raw).ToString();
  const v1::JobSpec spec = WithDefaults(raw);
  EXPECT_EQ(spec.schedule(), "zbv");
  EXPECT_EQ(spec.vpp(), 2);
  EXPECT_EQ(spec.mem_limit(), 0);
  auto plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->predicted_makespan(), 25.5);

  // The same plan as naming the winner, and as planning "best" directly.
  v1::JobSpec named = raw;
  named.set_schedule("zbv");
  auto named_plan = PlanJob(WithDefaults(named));
  ASSERT_TRUE(named_plan.ok());
  EXPECT_EQ(named_plan->SerializeAsString(), plan->SerializeAsString());
  v1::JobSpec unresolved = spec;
  unresolved.set_schedule("best");
  unresolved.set_vpp(0);
  auto direct = PlanJob(unresolved);
  ASSERT_TRUE(direct.ok()) << direct.status().ToString();
  EXPECT_EQ(direct->SerializeAsString(), plan->SerializeAsString());
}

// WithDefaults leaves the ranking for the coordinator to store (pipectl status shows it): the
// winner first, then the runners-up, shortest first, and the refusals.
TEST(BestScheduleJobTest, TheRankingIsKept) {
  v1::BestScheduleReport report;
  const v1::JobSpec spec = WithDefaults(BestSpec(3), &report);
  EXPECT_EQ(spec.schedule(), "v-half");
  ASSERT_GE(report.ranked_size(), 2);
  EXPECT_EQ(report.ranked(0).schedule(), "v-half");
  EXPECT_EQ(report.ranked(0).vpp(), 2);
  EXPECT_EQ(report.ranked(0).predicted_makespan(), 26.5);
  EXPECT_LE(report.ranked(0).peak_activations(), 3);
  for (int k = 1; k < report.ranked_size(); ++k) {
    EXPECT_GE(report.ranked(k).predicted_makespan(), report.ranked(k - 1).predicted_makespan());
    EXPECT_LE(report.ranked(k).peak_activations(), 3);
  }
  EXPECT_EQ(report.mem_limit(), 3);
  ASSERT_GT(report.refused_size(), 0);
  EXPECT_EQ(report.refused(0).rfind("fthenb: ", 0), 0u) << report.refused(0);
  // A named schedule leaves none (and clears what was there).
  v1::JobSpec named = BestSpec();
  named.set_schedule("zbv");
  WithDefaults(named, &report);
  EXPECT_EQ(report.ranked_size(), 0);
  EXPECT_EQ(report.refused_size(), 0);
}

// spec.memLimit 3 refuses the schedules at 1F1B's memory and above: V-Half runs (26.5).
TEST(BestScheduleJobTest, MemLimitChoosesAnother) {
  const v1::JobSpec spec = WithDefaults(BestSpec(3));
  EXPECT_EQ(spec.schedule(), "v-half");
  EXPECT_EQ(spec.vpp(), 2);
  auto plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->predicted_makespan(), 26.5);
}

// The layers are placed per schedule: 4 layers over pp 4 leave the two-chunk schedules out, and
// stageLayers (one count per rank) is honoured by each candidate.
TEST(BestScheduleJobTest, LayersDecideWhatFits) {
  v1::JobSpec raw = BestSpec();
  raw.mutable_model()->set_layers(4);
  EXPECT_EQ(WithDefaults(raw).schedule(), "zbh2");
  EXPECT_EQ(WithDefaults(raw).vpp(), 1);
  raw.mutable_model()->set_layers(12);
  for (int n : {3, 3, 5, 1}) raw.add_stage_layers(n);
  ASSERT_TRUE(ValidateJobSpec(raw).ok()) << ValidateJobSpec(raw).ToString();
  // Rank 3's single layer cannot fill two chunks: the flat schedules compete.
  EXPECT_EQ(WithDefaults(raw).vpp(), 1);
}

TEST(BestScheduleJobTest, NothingFitsNamesTheFieldAndEachReason) {
  const v1::JobSpec raw = BestSpec(0.5);
  ASSERT_TRUE(ValidateJobSpec(raw).ok());
  const v1::JobSpec spec = WithDefaults(raw);
  EXPECT_EQ(spec.schedule(), "best");  // left for PlanJob to explain
  auto plan = PlanJob(spec);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), Code::kFailedPrecondition);
  const std::string& m = plan.status().message();
  EXPECT_EQ(m.rfind("spec.schedule: \"best\" found no registered schedule for spec.pp 4, spec.vpp 0, "
                    "spec.microbatches 8 and spec.model.layers 8 within spec.memLimit 0.5: fthenb: peak activations 8 "
                    "on rank 0, above the memory limit 0.5; 1f1b: ",
                    0),
            0u)
      << m;
  EXPECT_NE(m.find("; zb-auto: spec.memLimit: must be >= 1"), std::string::npos) << m;
}

TEST(BestScheduleJobTest, ValidationKnowsBest) {
  v1::JobSpec s = BestSpec();
  s.set_vpp(3);
  s.mutable_model()->set_layers(12);
  ASSERT_TRUE(ValidateJobSpec(s).ok());
  EXPECT_EQ(WithDefaults(s).schedule(), "interleaved");  // of interleaved and looped-bfs, the two at vpp 3
  EXPECT_EQ(WithDefaults(s).vpp(), 3);
  s.mutable_model()->set_layers(11);
  EXPECT_EQ(ValidateJobSpec(s).message(),
            "spec.model.layers: must be >= spec.pp x spec.vpp = 12 (a layer for each stage), got 11");
  s = BestSpec();
  s.set_csv_schedule("0F0");
  EXPECT_EQ(ValidateJobSpec(s).message(), "spec.csvSchedule: only allowed when spec.schedule is \"csv\"");
}

}  // namespace
}  // namespace pipecoord::jobplan
