// The straggler and bubble checks on synthetic timings of a planned 1f1b job.
#include <gtest/gtest.h>

#include "coordinator/health/bubble_check.h"
#include "coordinator/health/straggler_check.h"
#include "jobplan/test_spec.h"
#include "proto/op_kinds.h"

namespace pipecoord::coordinator::health {
namespace {

TEST(StragglerCheck, ThreeTimesSlowerRankIsFlaggedAfterTwoSteps) {
  jobplan::HealthSettings s;
  s.straggler_min_delta_s = 0.0001;
  StragglerCheck c(s, 2, 2);
  std::vector<v1::HealthEvent> events;
  for (int step = 0; step < 4; ++step) {
    for (int k = 0; k < 4; ++k) {
      c.Add(0, step, v1::F, 0.001, 1);
      c.Add(1, step, v1::F, 0.003, 1);
    }
    auto e = c.Evaluate(step);
    if (!e.empty()) {
      EXPECT_EQ(step, 2);  // warm-up step 0 ignored, then under the threshold at steps 1 and 2
      events.insert(events.end(), e.begin(), e.end());
    }
  }
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind(), v1::STRAGGLER);
  EXPECT_EQ(events[0].rank(), 1);
  EXPECT_EQ(events[0].message(),
            "straggler: rank 1 (dp 0) at step 2: F relative score 0.333 < 0.75 (median 3.000 ms per cost unit, "
            "the fastest rank 0 (dp 0) 1.000 ms)");
  ASSERT_EQ(c.scores().size(), 2u);
  EXPECT_DOUBLE_EQ(c.scores()[1].relative, 1.0 / 3);
  EXPECT_DOUBLE_EQ(c.scores()[0].relative, 1.0);
  EXPECT_DOUBLE_EQ(c.FastestMedian(), 0.001);
}

TEST(StragglerCheck, JitterUnderTheMinimumDeltaIsNotAStraggler) {
  StragglerCheck c(jobplan::HealthSettings(), 2, 2);  // 1 ms minimum per action
  for (int step = 0; step < 10; ++step) {
    for (int k = 0; k < 4; ++k) {
      c.Add(0, step, v1::F, 0.0001, 1);
      c.Add(1, step, v1::F, 0.0003, 1);  // 3x, but 0.2 ms per action
    }
    EXPECT_TRUE(c.Evaluate(step).empty());
  }
}

TEST(StragglerCheck, IndividualScoreNeedsAWholeWindowUnderTheThreshold) {
  jobplan::HealthSettings s;
  s.straggler_window = 4;
  s.straggler_min_delta_s = 0.0001;
  StragglerCheck c(s, 1, 1);
  int flagged_at = -1;
  for (int step = 0; step < 40 && flagged_at < 0; ++step) {
    const double v = step < 12 ? 0.001 : 0.002;  // twice as slow from step 12 on
    for (int k = 0; k < 4; ++k) c.Add(0, step, v1::BW, v, 2);
    auto e = c.Evaluate(step);
    if (!e.empty()) {
      flagged_at = step;
      EXPECT_EQ(e[0].message(),
                "straggler: rank 0 (dp 0) at step " + std::to_string(step) +
                    ": BW individual score 0.500 < 0.75 (median 2.000 ms per cost unit, its best 1.000 ms)");
    }
  }
  // Step 13's window (steps 10..13) is half slow: median 1.5 ms, score 0.67, under the threshold;
  // the fourth step in a row under it (a whole window) is step 16.
  EXPECT_EQ(flagged_at, 16);
}

// One rank's step as the executor reports it: the plan's actions, each compute action taking its
// predicted cost x `scale` seconds, started at its predicted start, plus `delay` before slot k.
std::vector<v1::ActionTiming> Timings(const v1::Plan& plan, const jobplan::PlanExpectations& e, int rank, double scale,
                                      int delayed_slot, double delay, int wait_peer) {
  std::vector<v1::ActionTiming> out;
  const auto ns = [](double s) { return static_cast<int64_t>(s * 1e9); };
  size_t k = 0;
  double shift = 0;
  for (const v1::Action& a : plan.ranks(rank).actions()) {
    v1::ActionTiming t;
    *t.mutable_action() = a;
    t.set_step(3);
    if (v1::IsCompute(a.op())) {
      if (static_cast<int>(k) == delayed_slot) {
        shift += delay;
        t.set_wait_ns(ns(delay));
        t.set_wait_peer(wait_peer);
      }
      t.set_start_ns(ns(10 + e.ranks[rank][k].start * scale + shift));
      t.set_end_ns(ns(10 + e.ranks[rank][k].end * scale + shift));
      ++k;
    } else {
      const double at = 10 + (k == 0 ? 0 : e.ranks[rank][k - 1].end * scale) + shift;
      t.set_start_ns(ns(at));
      t.set_end_ns(ns(at));
    }
    out.push_back(t);
  }
  return out;
}

TEST(BubbleCheck, MeasuredMatchesPredictedThenAWaitTooLong) {
  const v1::Job job = jobplan::TestJob(jobplan::TestSpec());
  const jobplan::PlanExpectations e = jobplan::ExpectPlan(job.spec(), job.plan()).value();
  jobplan::HealthSettings s;  // limit: max(0.05 s, 0.5 x 15 cost units x 1 ms) = 0.05 s
  BubbleCheck b(s, e, 2, 2);
  EXPECT_DOUBLE_EQ(b.Limit(0.001), 0.05);
  EXPECT_FALSE(b.OnRankStep(0, 3, Timings(job.plan(), e, 0, 0.001, -1, 0, -1), 0.001));
  // Rank 0's BW0 (slot 2) waits 80 ms for rank 1's gradient where the plan predicts 2 ms.
  auto ev = b.OnRankStep(0, 3, Timings(job.plan(), e, 0, 0.001, 2, 0.080, 1), 0.001);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind(), v1::BUBBLE);
  EXPECT_EQ(ev->rank(), 0);
  EXPECT_EQ(ev->step(), 3);
  EXPECT_EQ(ev->message(),
            "bubble: rank 0 (dp 0) step 3: idle 0.082 s before 0BW0 at +0.002 s into the step, predicted 0.002 s "
            "(limit +0.050 s); waited 0.080 s for rank 1 (dp 0)");
  // Warm-up steps and an uncalibrated scale check nothing.
  EXPECT_FALSE(b.OnRankStep(1, 0, Timings(job.plan(), e, 1, 0.001, 0, 1.0, 0), 0.001));
  EXPECT_FALSE(b.OnRankStep(1, 3, Timings(job.plan(), e, 1, 0.001, 0, 1.0, 0), 0));
}

}  // namespace
}  // namespace pipecoord::coordinator::health
