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

// The probe runs the stage's largest GEMM: tokens x hidden x (ffn / tp), the vocabulary's share on
// the rank with the LM head when wider; rows and columns cut to 2^22 / hidden each.
TEST(ProbeGemm, TheStagesLargestGemm) {
  v1::JobSpec spec = TestSpec();
  spec.mutable_model()->set_hidden(64);
  spec.mutable_model()->set_ffn_hidden(192);
  spec.mutable_model()->set_vocab(512);
  spec.mutable_model()->set_seq_len(32);
  spec.set_micro_batch_size(4);
  auto is = [](ProbeGemm g, int64_t m, int64_t k, int64_t n) { return g.m == m && g.k == k && g.n == n; };
  EXPECT_TRUE(is(ProbeGemmFor(spec, false), 128, 64, 192));
  EXPECT_TRUE(is(ProbeGemmFor(spec, true), 128, 64, 512));
  spec.set_tp(2);
  EXPECT_TRUE(is(ProbeGemmFor(spec, false), 128, 64, 96));
  EXPECT_TRUE(is(ProbeGemmFor(spec, true), 128, 64, 256));
  spec.mutable_model()->set_vocab(128);
  EXPECT_TRUE(is(ProbeGemmFor(spec, true), 128, 64, 96));  // w1's share is the wider
  spec.set_tp(1);
  spec.mutable_model()->set_hidden(8192);
  spec.mutable_model()->set_ffn_hidden(28672);
  spec.mutable_model()->set_seq_len(8192);
  EXPECT_TRUE(is(ProbeGemmFor(spec, false), 512, 8192, 512));  // 2^22 / 8192 rows and columns
  spec.mutable_health()->set_probe_size(48);
  EXPECT_TRUE(is(ProbeGemmFor(spec, true), 48, 48, 48));
  spec.mutable_health()->set_probe_size(0);
  spec.mutable_worker()->set_kind("torch");
  EXPECT_TRUE(is(ProbeGemmFor(spec, true), 32, 32, 32));
}

TEST(ProbeGemm, HoldsHeadFollowsThePlan) {
  const v1::Plan plan = PlanJob(TestSpec()).value();
  EXPECT_FALSE(HoldsHead(plan, 0));
  EXPECT_TRUE(HoldsHead(plan, 1));
}

// The replay: the earliest F before the probe whose backward comes after it, when the window holds
// kReplayFit of its time; a probe before the rank's first F (or after its last backward) has none.
TEST(ProbePlacement, TheProbeNamesTheForwardItReplays) {
  v1::JobSpec spec = TestSpec("1f1b", 4);  // f 1, b 2 (TinySpec's costs)
  const v1::Plan plan = PlanJob(spec).value();
  auto probe_of = [&](int rank) {
    for (const v1::Action& a : plan.ranks(rank).actions()) {
      if (a.op() == v1::PROBE) return std::make_pair(a.stage(), a.microbatch());
    }
    return std::make_pair(-2, -2);
  };
  // Rank 0 of 1f1b pp 4: after its warm-up forwards F0..F2, before B0 (window 3 t_b): F0.
  EXPECT_EQ(probe_of(0), std::make_pair(0, 0));
  // The last rank probes before OPT, after its last backward: nothing held, nothing replayed.
  EXPECT_EQ(probe_of(3).second, -1);
  // A window shorter than kReplayFit F's: the known-answer GEMM only.
  spec.mutable_costs()->set_f(10);
  spec.mutable_costs()->set_b(1);
  spec.mutable_costs()->set_w(1);
  const v1::Plan slow_f = PlanJob(spec).value();
  for (const v1::Action& a : slow_f.ranks(0).actions()) {
    if (a.op() == v1::PROBE) {
      EXPECT_EQ(a.microbatch(), -1);
    }
  }
  // health.replayOff: no probe names an F.
  spec = TestSpec("1f1b", 4);
  spec.mutable_health()->set_replay_off(true);
  const v1::Plan off = PlanJob(spec).value();
  for (int r = 0; r < 4; ++r) {
    for (const v1::Action& a : off.ranks(r).actions()) {
      if (a.op() == v1::PROBE) {
        EXPECT_EQ(a.microbatch(), -1) << r;
      }
    }
  }
}

}  // namespace
}  // namespace pipecoord::jobplan
