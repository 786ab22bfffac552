// Data parallel in a job's plan: with dp > 1 on CPU workers every rank's list reduces each stage's
// gradients with its own REDUCE_GRAD right after the stage's last W (schedules/reduce_grads.h),
// then OPT; cuda jobs keep the one all-reduce at OPT; spec.costs.reduceGrad prices it.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "jobplan/plan_convert.h"
#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "jobplan/tiny_spec_for_tests.h"

namespace pipecoord::jobplan {
namespace {

namespace sch = pipecoord::schedules;

std::string RankText(const v1::Plan& plan, int r) {
  std::string out;
  for (const v1::Action& a : plan.ranks(r).actions()) {
    if (!out.empty()) out += ' ';
    out += sch::ToString(FromProto(a));
  }
  return out;
}

v1::Plan MustPlan(const v1::JobSpec& spec) {
  EXPECT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec).ToString();
  auto plan = PlanJob(WithDefaults(spec));
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? *plan : v1::Plan{};
}

v1::JobSpec Dp2(const std::string& schedule) {
  v1::JobSpec s = TinySpec(2, schedule);
  s.set_dp(2);
  return s;
}

TEST(DataParallelPlanTest, OneFOneB) {
  const v1::Plan plan = MustPlan(Dp2("1f1b"));
  EXPECT_EQ(RankText(plan, 0),
            "0F0 0SEND_F0 0F1 0SEND_F1 0PROBE0 0RECV_B0 0BW0 0F2 0SEND_F2 0RECV_B1 0BW1 0F3 0SEND_F3 0RECV_B2 0BW2 "
            "0RECV_B3 0BW3 0REDUCE_GRAD 0OPT");
  EXPECT_EQ(RankText(plan, 1),
            "1RECV_F0 1RECV_F1 1F0 1BW0 1SEND_B0 1F1 1RECV_F2 1BW1 1SEND_B1 1F2 1RECV_F3 1BW2 1SEND_B2 1F3 1BW3 "
            "1SEND_B3 1REDUCE_GRAD 1PROBE-2 1OPT");
}

TEST(DataParallelPlanTest, Zbh1) {
  const v1::Plan plan = MustPlan(Dp2("zbh1"));
  EXPECT_EQ(RankText(plan, 0),
            "0F0 0SEND_F0 0F1 0SEND_F1 0PROBE-1 0RECV_B0 0B0 0W0 0RECV_B1 0F2 0SEND_F2 0B1 0W1 0RECV_B2 0F3 0SEND_F3 "
            "0B2 0W2 0RECV_B3 0B3 0W3 0REDUCE_GRAD 0OPT");
  EXPECT_EQ(RankText(plan, 1),
            "1PROBE-1 1RECV_F0 1RECV_F1 1F0 1B0 1SEND_B0 1F1 1B1 1SEND_B1 1RECV_F2 1W0 1F2 1B2 1SEND_B2 1RECV_F3 1W1 "
            "1F3 1B3 1SEND_B3 1W2 1W3 1REDUCE_GRAD 1OPT");
}

int Count(const v1::Plan& plan, v1::Op op) {
  int n = 0;
  for (const v1::RankJobs& r : plan.ranks()) {
    for (const v1::Action& a : r.actions()) n += a.op() == op;
  }
  return n;
}

// dp 1 has nothing to reduce; cuda workers all-reduce every gradient at OPT (one device buffer).
TEST(DataParallelPlanTest, OnlyDataParallelCpuJobs) {
  EXPECT_EQ(Count(MustPlan(TinySpec(2, "1f1b")), v1::REDUCE_GRAD), 0);
  v1::JobSpec cuda = Dp2("1f1b");
  cuda.set_device("cuda");
  EXPECT_EQ(Count(MustPlan(cuda), v1::REDUCE_GRAD), 0);
  EXPECT_FALSE(ReducesGradientsPerStage(cuda));
  EXPECT_TRUE(ReducesGradientsPerStage(Dp2("1f1b")));
  EXPECT_EQ(Count(MustPlan(Dp2("interleaved")), v1::REDUCE_GRAD), 4);  // one per virtual stage
  EXPECT_EQ(Count(MustPlan(Dp2("zbv")), v1::REDUCE_GRAD), 4);
  // An imported CSV runs as written: without REDUCE_GRAD, the one all-reduce at OPT.
  v1::JobSpec csv = Dp2("csv");
  csv.set_microbatches(1);
  csv.set_csv_schedule("0F0,0B0\n1F0,1B0\n");
  EXPECT_FALSE(ReducesGradientsPerStage(csv));
  EXPECT_EQ(Count(MustPlan(csv), v1::REDUCE_GRAD), 0);
  csv.set_csv_schedule("0F0,0B0,0REDUCE_GRAD\n1F0,1B0,1REDUCE_GRAD\n");
  EXPECT_EQ(Count(MustPlan(csv), v1::REDUCE_GRAD), 2);
}

// spec.costs.reduceGrad 2 (1 per stage of two): 1F1B's one stage per rank is reduced after the
// rank's last compute, the whole cost added; interleaved reduces its later chunk while the rank
// runs the first chunk's last two backwards (2 units), so only the first chunk's 1 is added.
TEST(DataParallelPlanTest, PredictedSpanCountsWhatTheCoolDownDoesNotHide) {
  for (const auto& [schedule, added] : {std::pair<const char*, double>{"1f1b", 2}, {"interleaved", 1}}) {
    v1::JobSpec spec = Dp2(schedule);
    const double free = MustPlan(spec).predicted_makespan();
    spec.mutable_costs()->set_f(1);
    spec.mutable_costs()->set_b(1);
    spec.mutable_costs()->set_w(1);
    spec.mutable_costs()->set_reduce_grad(2);
    EXPECT_EQ(MustPlan(spec).predicted_makespan(), free + added) << schedule;
  }
}

TEST(DataParallelPlanTest, ReduceGradCostIsChecked) {
  v1::JobSpec spec = Dp2("1f1b");
  spec.mutable_costs()->set_f(1);
  spec.mutable_costs()->set_reduce_grad(-1);
  EXPECT_EQ(ValidateJobSpec(spec).message(), "spec.costs.reduceGrad: must be a finite number >= 0, got -1");
}

}  // namespace
}  // namespace pipecoord::jobplan
