// Data parallel stage by stage: a dp 2 job whose plan reduces each stage's gradients with its own
// REDUCE_GRAD (in the background, jobplan::ReducesGradientsPerStage) trains bit for bit as the
// same schedule reducing every gradient after the step (the schedule imported as a CSV without
// REDUCE_GRAD, which runs as written): the same losses and the same final weights and AdamW
// moments on every rank. The reductions are timed: each REDUCE_GRAD's span ends before its rank's
// OPT starts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "schedules/csv_format.h"
#include "schedules/registry.h"
#include "worker/daemon/local_run.h"

namespace pipecoord::worker {
namespace {

struct Case {
  std::string schedule;
  int pp, dp, microbatches;
};

v1::JobSpec Spec(const Case& c) {
  v1::JobSpec s;
  s.set_name(c.schedule);
  s.set_schedule(c.schedule);
  s.set_pp(c.pp);
  s.set_dp(c.dp);
  s.set_microbatches(c.microbatches);
  s.set_micro_batch_size(2);
  s.set_steps(3);
  s.set_learning_rate(0.01);
  auto* m = s.mutable_model();
  m->set_layers(2 * c.pp * 2);
  m->set_hidden(16);
  m->set_heads(2);
  m->set_vocab(32);
  m->set_seq_len(8);
  m->set_seed(7);
  return s;
}

// The same job on the same schedule, imported as a CSV: no REDUCE_GRAD, so one all-reduce at OPT.
v1::JobSpec AfterTheStep(const v1::JobSpec& spec) {
  schedules::ScheduleSpec ss;
  ss.pp = spec.pp();
  ss.microbatches = spec.microbatches();
  auto info = schedules::FindSchedule(spec.schedule());
  EXPECT_TRUE(info.ok());
  ss.vpp = (*info)->default_vpp;
  auto s = schedules::BuildSchedule(spec.schedule(), ss);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  v1::JobSpec out = spec;
  out.set_schedule("csv");
  out.set_vpp(s->vpp);
  out.set_csv_schedule(schedules::ScheduleToCsv(*s));
  return out;
}

LocalRunResult MustRun(const v1::JobSpec& spec) {
  auto run = RunLocally(spec, {}, {}, /*keep_final_state=*/true);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  return run.ok() ? std::move(run).value() : LocalRunResult{};
}

int CountOp(const LocalRunResult& run, v1::Op op) {
  int n = 0;
  for (const auto& rank : run.reports) {
    for (const StepReport& step : rank) {
      for (const v1::ActionTiming& t : step.actions) n += t.action().op() == op;
    }
  }
  return n;
}

class StageReduceRunTest : public ::testing::TestWithParam<Case> {};

// The baseline is the same plan but for the REDUCE_GRADs (what bench/stage_reduce_bench compares).
TEST_P(StageReduceRunTest, TheBaselineIsTheSamePlanWithoutReduceGrad) {
  const v1::JobSpec spec = jobplan::WithDefaults(Spec(GetParam()));
  auto by_stage = jobplan::PlanJob(spec);
  auto after_step = jobplan::PlanJob(jobplan::WithDefaults(AfterTheStep(spec)));
  ASSERT_TRUE(by_stage.ok()) << by_stage.status().ToString();
  ASSERT_TRUE(after_step.ok()) << after_step.status().ToString();
  for (v1::RankJobs& r : *by_stage->mutable_ranks()) {
    auto* actions = r.mutable_actions();
    actions->erase(std::remove_if(actions->begin(), actions->end(),
                                  [](const v1::Action& a) { return a.op() == v1::REDUCE_GRAD; }),
                   actions->end());
  }
  EXPECT_EQ(by_stage->SerializeAsString(), after_step->SerializeAsString());
}

TEST_P(StageReduceRunTest, TrainsBitForBitAsTheAllReduceAfterTheStep) {
  const v1::JobSpec spec = Spec(GetParam());
  const LocalRunResult by_stage = MustRun(spec);
  const LocalRunResult after_step = MustRun(AfterTheStep(spec));
  const int world = spec.pp() * spec.dp();
  ASSERT_EQ(by_stage.reports.size(), static_cast<size_t>(world));
  ASSERT_EQ(after_step.reports.size(), static_cast<size_t>(world));
  const int stages = spec.pp() * (spec.schedule() == "1f1b" || spec.schedule() == "zbh1" ? 1 : 2);
  // One REDUCE_GRAD per stage, replica and step in the one; none in the other.
  EXPECT_EQ(CountOp(by_stage, v1::REDUCE_GRAD), stages * spec.dp() * spec.steps());
  EXPECT_EQ(CountOp(after_step, v1::REDUCE_GRAD), 0);

  EXPECT_EQ(StepLosses(by_stage), StepLosses(after_step));
  EXPECT_EQ(StepLosses(by_stage).size(), static_cast<size_t>(spec.steps()));
  for (int g = 0; g < world; ++g) {
    ASSERT_FALSE(by_stage.final_state[g].empty()) << "rank " << g;
    EXPECT_EQ(by_stage.final_state[g], after_step.final_state[g]) << "rank " << g;
  }
  // The two replicas of a pipeline rank end with the same weights (they averaged gradients).
  for (int r = 0; r < spec.pp(); ++r) EXPECT_EQ(by_stage.final_state[r], by_stage.final_state[spec.pp() + r]);

  // Timed like any action: each REDUCE_GRAD's span is its all-reduce, done before OPT starts.
  for (const auto& rank : by_stage.reports) {
    for (const StepReport& step : rank) {
      int64_t reduced = 0, opt_start = -1;
      for (const v1::ActionTiming& t : step.actions) {
        if (t.action().op() == v1::REDUCE_GRAD) {
          EXPECT_GT(t.end_ns(), t.start_ns());
          reduced = std::max(reduced, t.end_ns());
        }
        if (t.action().op() == v1::OPT) opt_start = t.start_ns();
      }
      EXPECT_GE(opt_start, reduced);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, StageReduceRunTest,
                         ::testing::Values(Case{"1f1b", 2, 2, 4}, Case{"zbh1", 2, 2, 4}, Case{"interleaved", 2, 2, 4},
                                           Case{"zbv", 2, 2, 4}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = info.param.schedule + "_pp" + std::to_string(info.param.pp) + "_dp" +
                                           std::to_string(info.param.dp);
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

// dp 3: each stage's ring cuts its own chunks, so an element may be summed in another order than
// in the one all-reduce: equal to rounding, and the same bits on every run.
TEST(StageReduceRunTest, ThreeReplicasAreDeterministicAndEqualToRounding) {
  const v1::JobSpec spec = Spec({"interleaved", 2, 3, 4});
  const LocalRunResult first = MustRun(spec), second = MustRun(spec);
  const LocalRunResult after_step = MustRun(AfterTheStep(spec));
  EXPECT_EQ(StepLosses(first), StepLosses(second));
  for (size_t g = 0; g < first.final_state.size(); ++g) EXPECT_EQ(first.final_state[g], second.final_state[g]);
  const std::vector<double> a = StepLosses(first), b = StepLosses(after_step);
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-6 * std::abs(b[k])) << "step " << k;
}

}  // namespace
}  // namespace pipecoord::worker
