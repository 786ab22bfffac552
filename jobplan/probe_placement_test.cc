#include "jobplan/probe_placement.h"

#include <gtest/gtest.h>

#include "jobplan/test_spec.h"

namespace pipecoord::jobplan {
namespace {

std::vector<int> ProbePositions(const v1::Plan& plan, int rank) {
  std::vector<int> out;
  for (int i = 0; i < plan.ranks(rank).actions_size(); ++i) {
    if (plan.ranks(rank).actions(i).op() == v1::PROBE) out.push_back(i);
  }
  return out;
}

TEST(ProbePlacement, OneFOneBUsesTheClosedFormWindows) {
  // 1f1b p=2 m=4, f = b = w = 1 (t_f 1, t_b 2): rank 0 idles (p-r-1) t_b = 2 waiting for its first
  // backward, rank 1 idles r t_f = 1 before its warm-up and r t_b = 2 at the end.
  const v1::JobSpec spec = TestSpec();
  auto windows = ChooseProbeWindows(spec, PlanJob(spec).value());
  ASSERT_TRUE(windows.ok()) << windows.status().ToString();
  ASSERT_EQ(windows->size(), 2u);
  EXPECT_TRUE((*windows)[0].closed_form);
  EXPECT_DOUBLE_EQ((*windows)[0].window.end - (*windows)[0].window.start, 2);
  EXPECT_DOUBLE_EQ((*windows)[1].window.end - (*windows)[1].window.start, 2);
  EXPECT_DOUBLE_EQ((*windows)[1].window.end, 15);  // the trailing window, to the makespan
  const v1::Plan plan = PlanJob(spec).value();  // PlanJob places them
  // Rank 0: F0 SEND_F0 F1 SEND_F1 | PROBE | RECV_B0 BW0 ...
  EXPECT_EQ(ProbePositions(plan, 0), std::vector<int>{4});
  EXPECT_EQ(plan.ranks(0).actions(5).op(), v1::RECV_B);
  // Rank 1's trailing window: just before OPT.
  const int n = plan.ranks(1).actions_size();
  EXPECT_EQ(ProbePositions(plan, 1), std::vector<int>{n - 2});
  EXPECT_EQ(plan.ranks(1).actions(n - 1).op(), v1::OPT);
}

TEST(ProbePlacement, OtherSchedulesUseTheSimulatorsWindows) {
  const v1::JobSpec spec = TestSpec("zbh1");
  auto windows = ChooseProbeWindows(spec, PlanJob(spec).value());
  ASSERT_TRUE(windows.ok());
  for (const ProbeWindow& w : *windows) EXPECT_FALSE(w.closed_form);
  const v1::Plan plan = PlanJob(spec).value();
  EXPECT_EQ(ProbePositions(plan, 0).size(), 1u);
  EXPECT_EQ(ProbePositions(plan, 1).size(), 1u);
}

TEST(ProbePlacement, ProbesOffLeavesThePlanAlone) {
  v1::JobSpec spec = TestSpec();
  spec.mutable_health()->set_probes_off(true);
  const v1::Plan plan = PlanJob(spec).value();
  EXPECT_TRUE(ProbePositions(plan, 0).empty());
  EXPECT_TRUE(ProbePositions(plan, 1).empty());
  EXPECT_EQ(plan.ranks(0).actions_size(), 17);
}

}  // namespace
}  // namespace pipecoord::jobplan
