// Calibration, the idle split and rebalance on a hand-timed 1F1B job: pp 2, 4 micro-batches,
// stageLayers [1, 3], F 0.5 ms and BW 1 ms per layer, OPT 1 ms on each rank.
//   equal costs (F 1, BW 2 ms on both): makespan (4 + 1) x 3 = 15 ms, each rank busy 12, idle 3;
//   measured stages (rank 0 F 0.5 BW 1, rank 1 F 1.5 BW 3), timed by hand:
//     rank 0 F0 [0,.5] F1 [.5,1] BW0 [5,6] F2 [6,6.5] BW1 [9.5,10.5] F3 [10.5,11] BW2 [14,15] BW3 [18.5,19.5]
//     rank 1 F0 [.5,2] BW0 [2,5] F1 [5,6.5] BW1 [6.5,9.5] F2 [9.5,11] BW2 [11,14] F3 [14,15.5] BW3 [15.5,18.5]
//     makespan 19.5: idle rank 0 19.5 - 6 = 13.5, rank 1 19.5 - 18 = 1.5;
//   calibrated (+ OPT 1 ms after each rank's last BW): makespan 20.5, idle 14.5 and 2.5.
#include "jobplan/calibration.h"

#include <gtest/gtest.h>

#include "jobplan/idle_breakdown.h"
#include "jobplan/measured_step_for_tests.h"
#include "jobplan/plan_job.h"
#include "jobplan/rebalance.h"
#include "jobplan/spec_validation.h"
#include "jobplan/tiny_spec_for_tests.h"

namespace pipecoord::jobplan {
namespace {

constexpr double kMs = 1e-3;

struct HandJob {
  v1::JobSpec spec;
  v1::Plan plan;
  HandJob() {
    v1::JobSpec raw = TinySpec(2, "1f1b");
    raw.add_stage_layers(1);
    raw.add_stage_layers(3);
    spec = WithDefaults(raw);
    auto planned = PlanJob(spec);
    EXPECT_TRUE(planned.ok()) << planned.status().ToString();
    plan = *planned;
  }
  schedules::ActionDurations Durations(double comm_s = 0, int slow = -1, double factor = 1) const {
    return PlanDurations(spec, plan, 0.5 * kMs, 1 * kMs, 0, 1 * kMs, comm_s, slow, factor);
  }
  std::vector<StepActions> Steps(int n, const schedules::ActionDurations& d) const {
    std::vector<StepActions> out;
    for (int i = 0; i < n; ++i) out.push_back(SimulatedStep(spec, plan, d, i, 1'000'000'000LL * (i + 1)));
    return out;
  }
  CalibratedJob Calibrated() const {
    auto costs = MeasureCosts(spec, plan, Steps(3, Durations()));
    EXPECT_TRUE(costs.ok()) << costs.status().ToString();
    auto job = Calibrate(spec, plan, *costs);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return std::move(job).value();
  }
};

TEST(CalibrationTest, MeasuresStageCostsNonComputeActionsAndTransfers) {
  HandJob h;
  auto costs = MeasureCosts(h.spec, h.plan, h.Steps(3, h.Durations(0.25 * kMs)));
  ASSERT_TRUE(costs.ok()) << costs.status().ToString();
  EXPECT_NEAR(costs->f[0], 0.5 * kMs, 1e-12);
  EXPECT_NEAR(costs->f[1], 1.5 * kMs, 1e-12);
  EXPECT_NEAR(costs->bw[0], 1 * kMs, 1e-12);
  EXPECT_NEAR(costs->bw[1], 3 * kMs, 1e-12);
  EXPECT_EQ(costs->b[0], 0);  // 1f1b runs fused BW only
  // Every input that was waited for arrived 0.25 ms after its producer ended.
  EXPECT_NEAR(costs->comm, 0.25 * kMs, 1e-12);
  const int last = h.plan.ranks(1).actions_size() - 1;
  ASSERT_EQ(h.plan.ranks(1).actions(last).op(), v1::OPT);
  EXPECT_NEAR(costs->other[1][last], 1 * kMs, 1e-12);
  EXPECT_EQ(costs->steps, 3);
}

TEST(CalibrationTest, RefusesStepsThatAreNotThePlansLists) {
  HandJob h;
  std::vector<StepActions> steps = h.Steps(1, h.Durations());
  steps[0][1].pop_back();
  EXPECT_EQ(MeasureCosts(h.spec, h.plan, steps).status().message(),
            "calibration: step 0 does not match the plan's job lists");
  EXPECT_FALSE(MeasureCosts(h.spec, h.plan, {}).ok());
}

TEST(CalibrationTest, ThreeSimulationsByHand) {
  const CalibratedJob j = HandJob().Calibrated();
  EXPECT_NEAR(j.equal.makespan, 15 * kMs, 1e-12);
  EXPECT_NEAR(j.stages.makespan, 19.5 * kMs, 1e-12);
  EXPECT_NEAR(j.calibrated.makespan, 20.5 * kMs, 1e-12);
  EXPECT_NEAR(j.calibrated.bubble_rate, 1 - 24.0 / (2 * 20.5), 1e-12);
  EXPECT_NEAR(j.expect.makespan, 20.5 * kMs, 1e-12);
  ASSERT_EQ(j.expect.ranks[0].size(), 8u);
  EXPECT_NEAR(j.expect.ranks[0][2].start, 5 * kMs, 1e-12);  // BW0 waits for rank 1's BW0
  const v1::Calibration p = ToProto(j, 0.042);
  EXPECT_NEAR(p.stage_b_s(1), 3 * kMs, 1e-12);  // the fused BW shown as B
  EXPECT_NEAR(p.predicted_step_s(), 20.5 * kMs, 1e-12);
  EXPECT_EQ(p.plan_step_s(), 0.042);
}

TEST(IdleBreakdownTest, UnevenStagesShowAsImbalance) {
  HandJob h;
  const CalibratedJob j = h.Calibrated();
  const StepActions step = h.Steps(1, h.Durations())[0];
  const IdleBreakdown b = SplitIdle(j, RankLayout::OfDegrees(2, step.size() / 2, 1), step, 20.5 * kMs, 0.1 * kMs);
  ASSERT_EQ(b.ranks.size(), 2u);
  const v1::IdleSplit& r0 = b.ranks[0].split();
  const v1::IdleSplit& r1 = b.ranks[1].split();
  EXPECT_NEAR(b.ranks[0].idle_s(), 14.5 * kMs, 1e-9);
  EXPECT_NEAR(r0.inherent_s(), 3 * kMs, 1e-12);
  EXPECT_NEAR(r0.imbalance_s(), 10.5 * kMs, 1e-12);
  EXPECT_NEAR(r0.comm_s(), 1 * kMs, 1e-12);
  EXPECT_NEAR(r0.variation_s(), 0, 1e-9);
  EXPECT_EQ(r0.cause_rank(), -1);
  EXPECT_NEAR(r1.imbalance_s(), -1.5 * kMs, 1e-12);  // the heavy rank idles less than an even one
  EXPECT_NEAR(r1.comm_s(), 1 * kMs, 1e-12);
  EXPECT_NEAR(b.total.imbalance_s(), 9 * kMs, 1e-12);  // 2 ranks x (19.5 - 15)
  EXPECT_NEAR(b.total.inherent_s() + b.total.imbalance_s() + b.total.comm_s() + b.total.variation_s(), 17 * kMs, 1e-9);
}

TEST(IdleBreakdownTest, ASlowRankShowsAsVariationNamingIt) {
  HandJob h;
  const CalibratedJob j = h.Calibrated();
  // Rank 0 computes 3x slower this step: rank 1 waits for its forwards.
  const StepActions step = h.Steps(1, h.Durations(0, 0, 3))[0];
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const auto& list : step) {
    lo = std::min(lo, list.front().start_ns());
    hi = std::max(hi, list.back().end_ns());
  }
  const double span = (hi - lo) * 1e-9;
  const IdleBreakdown b = SplitIdle(j, RankLayout::OfDegrees(2, step.size() / 2, 1), step, span, 0.1 * kMs);
  const v1::IdleSplit& r1 = b.ranks[1].split();
  EXPECT_GT(r1.variation_s(), 1 * kMs);
  EXPECT_EQ(r1.cause_rank(), 0);
  EXPECT_EQ(b.total.cause_rank(), 0);
  for (const v1::RankIdle& r : b.ranks) {
    const v1::IdleSplit& s = r.split();
    EXPECT_NEAR(s.inherent_s() + s.imbalance_s() + s.comm_s() + s.variation_s(), r.idle_s(), 1e-12);
  }
}

// Every transfer 0.5 ms later than calibrated (inputs leave on time, arrive late: a slow link):
// the extra idle goes to comm, not variation, and each rank's cause is the link it waited on.
TEST(IdleBreakdownTest, LateTransfersShowAsCommNamingTheLink) {
  HandJob h;
  const CalibratedJob j = h.Calibrated();  // measured with transfers of 0
  const StepActions step = h.Steps(1, h.Durations(0.5 * kMs))[0];
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const auto& list : step) {
    lo = std::min(lo, list.front().start_ns());
    hi = std::max(hi, list.back().end_ns());
  }
  const IdleBreakdown b = SplitIdle(j, RankLayout::OfDegrees(2, step.size() / 2, 1), step, (hi - lo) * 1e-9, 0.1 * kMs);
  const IdleBreakdown clean = [&] {
    const StepActions c = h.Steps(1, h.Durations())[0];
    return SplitIdle(j, RankLayout::OfDegrees(2, c.size() / 2, 1), c, 20.5 * kMs, 0.1 * kMs);
  }();
  for (int g = 0; g < 2; ++g) {
    const v1::IdleSplit& s = b.ranks[g].split();
    EXPECT_TRUE(s.cause_is_link()) << g;
    EXPECT_EQ(s.cause_rank(), 1 - g) << g;  // rank 1 waits on rank 0's activations, rank 0 on rank 1's gradients
    EXPECT_EQ(s.cause_link_to(), g) << g;
    EXPECT_GE(s.comm_s(), clean.ranks[g].split().comm_s() + 0.5 * kMs - 1e-9) << g;  // at least one late input each
    EXPECT_LT(std::abs(s.variation_s()), 0.6 * kMs) << g;  // what is left: the step's end moving
    EXPECT_NEAR(s.inherent_s() + s.imbalance_s() + s.comm_s() + s.variation_s(), b.ranks[g].idle_s(), 1e-12);
  }
  EXPECT_TRUE(b.total.cause_is_link());
  // A slow rank is still a rank, not a link (ASlowRankShowsAsVariationNamingIt's case).
  const StepActions slow = h.Steps(1, h.Durations(0, 0, 3))[0];
  const IdleBreakdown sb = SplitIdle(j, RankLayout::OfDegrees(2, slow.size() / 2, 1), slow, 30 * kMs, 0.1 * kMs);
  EXPECT_FALSE(sb.ranks[1].split().cause_is_link());
}

TEST(IdleBreakdownTest, TheWaitChainLeadsToTheSlowRank) {
  // pp 4, even layers: rank 1 slow; rank 3 waits on rank 2, which waited on rank 1.
  v1::JobSpec spec = WithDefaults(TinySpec(4, "1f1b"));
  const v1::Plan plan = PlanJob(spec).value();
  auto d = PlanDurations(spec, plan, 1 * kMs, 2 * kMs, 0, 0, 0);
  std::vector<StepActions> steps;
  for (int i = 0; i < 3; ++i) steps.push_back(SimulatedStep(spec, plan, d, i, 1'000'000'000LL * (i + 1)));
  const CalibratedJob j = Calibrate(spec, plan, MeasureCosts(spec, plan, steps).value()).value();
  const StepActions slow = SimulatedStep(spec, plan, PlanDurations(spec, plan, 1 * kMs, 2 * kMs, 0, 0, 0, 1, 4), 3, 0);
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const auto& list : slow) {
    lo = std::min(lo, list.front().start_ns());
    hi = std::max(hi, list.back().end_ns());
  }
  const IdleBreakdown b = SplitIdle(j, RankLayout::OfDegrees(4, slow.size() / 4, 1), slow, (hi - lo) * 1e-9, 0.1 * kMs);
  EXPECT_EQ(b.ranks[3].split().cause_rank(), 1);
  EXPECT_EQ(b.ranks[2].split().cause_rank(), 1);
  EXPECT_EQ(b.total.cause_rank(), 1);
  // Even stages and no comm: the calibrated idle is the schedule's own.
  EXPECT_NEAR(b.ranks[0].split().imbalance_s(), 0, 1e-12);
  EXPECT_GT(b.ranks[0].split().inherent_s(), 0);
}

TEST(RebalanceTest, EvensTheLayersAndPredictsTheGain) {
  HandJob h;
  const CalibratedJob j = h.Calibrated();
  auto p = ProposeRebalance(h.spec, h.plan, j);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(p->has_value());
  const v1::RebalanceProposal& r = **p;
  ASSERT_EQ(r.stage_layers_size(), 2);
  EXPECT_EQ(r.stage_layers(0), 2);
  EXPECT_EQ(r.stage_layers(1), 2);
  EXPECT_EQ(r.schedule(), "1f1b");
  // Current: the calibrated 20.5 ms; [2, 2]: 15 ms of even 1F1B + the last OPT 1 ms.
  EXPECT_NEAR(r.current_step_s(), 20.5 * kMs, 1e-12);
  EXPECT_NEAR(r.proposed_step_s(), 16 * kMs, 1e-12);
  EXPECT_NEAR(r.gain(), 1 - 16 / 20.5, 1e-12);
  const LayerCostModel model(h.spec, h.plan, j);
  EXPECT_NEAR(model.Predict({1, 3})->imbalance_idle_s, 9 * kMs, 1e-12);
  EXPECT_NEAR(model.Predict({2, 2})->imbalance_idle_s, 0, 1e-12);
  EXPECT_EQ(model.Predict({4, 0}).status().message().rfind("spec.stageLayers", 0), 0u);
}

TEST(RebalanceTest, NoProposalForABalancedJob) {
  v1::JobSpec spec = WithDefaults(TinySpec(2, "1f1b"));
  const v1::Plan plan = PlanJob(spec).value();
  auto d = PlanDurations(spec, plan, 0.5 * kMs, 1 * kMs, 0, 0, 0);
  std::vector<StepActions> steps = {SimulatedStep(spec, plan, d, 0, 0)};
  const CalibratedJob j = Calibrate(spec, plan, MeasureCosts(spec, plan, steps).value()).value();
  auto p = ProposeRebalance(spec, plan, j);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->has_value());
}

TEST(RebalanceTest, AFixedCostPerStageIsFittedSoTheRunningPlacementIsPredictedAsCalibrated) {
  // pp 4, stageLayers [1, 1, 1, 5]: F = 1 ms + 0.5 ms per layer, BW twice that, on every stage.
  v1::JobSpec raw = TinySpec(4, "1f1b");
  raw.mutable_model()->set_layers(8);
  for (int l : {1, 1, 1, 5}) raw.add_stage_layers(l);
  const v1::JobSpec spec = WithDefaults(raw);
  const v1::Plan plan = PlanJob(spec).value();
  MeasuredCosts costs;
  for (int l : {1, 1, 1, 5}) {
    costs.f.push_back((1 + 0.5 * l) * kMs);
    costs.bw.push_back(2 * (1 + 0.5 * l) * kMs);
    costs.b.push_back(0);
    costs.w.push_back(0);
  }
  const CalibratedJob j = Calibrate(spec, plan, costs).value();
  const LayerCostModel model(spec, plan, j);
  EXPECT_NEAR(model.Predict({1, 1, 1, 5})->step_s, j.calibrated.makespan, 1e-12);
  EXPECT_NE(model.Describe().find("per layer F 0.500 ms"), std::string::npos) << model.Describe();
  EXPECT_NE(model.Describe().find("per stage +3.000 ms"), std::string::npos) << model.Describe();  // F 1 + BW 2
  auto p = ProposeRebalance(spec, plan, j);
  ASSERT_TRUE(p.ok() && p->has_value());
  EXPECT_NEAR((**p).current_step_s(), j.calibrated.makespan, 1e-12);
  EXPECT_LT((**p).proposed_step_s(), 0.9 * j.calibrated.makespan);
}

}  // namespace
}  // namespace pipecoord::jobplan
