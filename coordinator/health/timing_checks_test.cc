// The straggler and bubble checks on synthetic timings of a planned 1f1b job.
#include <gtest/gtest.h>

#include "coordinator/health/bubble_check.h"
#include "coordinator/health/straggler_check.h"
#include "jobplan/test_spec.h"
#include "proto/op_kinds.h"

namespace pipecoord::coordinator::health {
namespace {

// Rank g's actions of one step: `n` each of F and B, per cost unit `pace` seconds, the first of
// each kind at `pace` and the others `noise` times as long (contention only ever adds time).
void AddStep(StragglerCheck& c, int g, int step, double pace, double noise = 1, int n = 4) {
  for (int k = 0; k < n; ++k) {
    const double v = k == 0 ? pace : pace * noise;
    c.Add(g, step, v1::F, v, 2);
    c.Add(g, step, v1::B, 1.2 * v, 2);
  }
}

TEST(StragglerCheck, ARankSlowFromTheStartIsFlaggedByItsRelativeScoreAfterTheBaseline) {
  jobplan::HealthSettings s;  // warm-up 1 step, baseline (calibration) 3: scored from step 4
  StragglerCheck c(s, RankLayout::OfDegrees(4, 1, 1));
  ASSERT_EQ(c.FirstScoredStep(), 4);
  std::vector<v1::HealthEvent> events;
  int flagged_at = -1;
  for (int step = 0; step < 8; ++step) {
    for (int g = 0; g < 4; ++g) AddStep(c, g, step, g == 2 ? 0.0015 : 0.001, 1.5);
    for (const v1::HealthEvent& e : c.Evaluate(step)) {
      if (flagged_at < 0) flagged_at = step;
      events.push_back(e);
    }
  }
  EXPECT_EQ(flagged_at, 5);  // scored at 4 and 5: two steps under the threshold
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind(), v1::STRAGGLER);
  EXPECT_EQ(events[0].rank(), 2);
  EXPECT_EQ(events[0].step(), 5);
  EXPECT_EQ(events[0].message(),
            "straggler: rank 2 (dp 0) at step 5: slower than the other ranks in every kind of action in 2 of the last "
            "3 steps: relative score 0.667 < 0.7 (fastest action per cost unit: F 1.500 vs 1.000 ms, B 1.800 vs 1.200 ms, "
            "the others' median)");
  ASSERT_EQ(c.scores().size(), 8u);  // 4 ranks x 2 kinds
  for (const StragglerScore& sc : c.scores()) {
    EXPECT_DOUBLE_EQ(sc.relative, sc.global_rank == 2 ? 1.0 / 1.5 : 1.0) << sc.global_rank;
    EXPECT_DOUBLE_EQ(sc.individual, 1.0);
    EXPECT_DOUBLE_EQ(sc.best, sc.recent);
  }
  // Ranks 0, 1 and 3 over the window: F 1 ms (x3), 1.5 ms (x9), B 1.2 ms (x3), 1.8 ms (x9).
  EXPECT_DOUBLE_EQ(c.FastestMedian(), 0.0015);
}

TEST(StragglerCheck, ARankThatSlowsDownIsFlaggedByItsIndividualScoreWithinFiveSteps) {
  jobplan::HealthSettings s;
  StragglerCheck c(s, RankLayout::OfDegrees(4, 1, 1));
  int flagged_at = -1;
  std::string message;
  for (int step = 0; step < 20 && flagged_at < 0; ++step) {
    for (int g = 0; g < 4; ++g) AddStep(c, g, step, g == 1 && step >= 10 ? 0.0015 : 0.001, 2);
    for (const v1::HealthEvent& e : c.Evaluate(step)) {
      flagged_at = step;
      message = e.message();
      EXPECT_EQ(e.rank(), 1);
    }
  }
  // The window (3 steps) holds only slow steps from step 12; under the threshold at 12 and 13.
  EXPECT_EQ(flagged_at, 13);
  EXPECT_EQ(message,
            "straggler: rank 1 (dp 0) at step 13: slower than its own baseline in every kind of action in 2 of the "
            "last 3 steps while the other ranks are not: individual score 0.667 < 0.7 (fastest action per cost unit in the last "
            "3 steps: F 1.500 vs its best 1.000 ms, the others x1.00, B 1.800 vs its best 1.200 ms, the others x1.00)");
}

// Two ranks (a pp 2 pipeline), rank 1 slow from the start (flagged at step 5 by its relative
// score, its pace steady after): when rank 0 later slows down 1.6x on its own, it is flagged too,
// judged against rank 1's pace since it was flagged. (Leaving a flagged rank out of the
// references, the rule before, left rank 0 with no peer and never flagged it: the pp 2 blind spot.)
TEST(StragglerCheck, ARankThatSlowsDownAfterItsOnlyPeerWasFlaggedIsFlaggedToo) {
  StragglerCheck c(jobplan::HealthSettings(), RankLayout::OfDegrees(2, 1, 1));
  std::vector<std::pair<int, int>> raised;  // (rank, step)
  for (int step = 0; step < 16; ++step) {
    AddStep(c, 0, step, step >= 8 ? 0.0016 : 0.001);
    AddStep(c, 1, step, 0.004);
    for (const v1::HealthEvent& e : c.Evaluate(step)) raised.push_back({e.rank(), e.step()});
  }
  // Rank 0's window holds only slow steps from step 10: under the threshold at 10 and 11.
  EXPECT_EQ(raised, (std::vector<std::pair<int, int>>{{1, 5}, {0, 11}}));
  // The same with an unflagged peer that keeps its pace: flagged at the same step.
  StragglerCheck d(jobplan::HealthSettings(), RankLayout::OfDegrees(2, 1, 1));
  int flagged_at = -1;
  for (int step = 0; step < 16 && flagged_at < 0; ++step) {
    AddStep(d, 0, step, step >= 8 ? 0.0016 : 0.001);
    AddStep(d, 1, step, 0.001);
    for (const v1::HealthEvent& e : d.Evaluate(step)) {
      EXPECT_EQ(e.rank(), 0);
      flagged_at = step;
    }
  }
  EXPECT_EQ(flagged_at, 11);
}

// A flagged rank's pace since it was flagged is the machine's drift reference: when the whole
// machine then slows 1.6x (every rank alike), the healthy rank is not flagged; and a flagged rank
// that recovers (faster than when flagged) does not make its healthy peer look slow.
TEST(StragglerCheck, AfterAFlagAMachineWideSlowdownOrTheStragglersRecoveryIsNoAlarm) {
  for (const bool recover : {false, true}) {
    StragglerCheck c(jobplan::HealthSettings(), RankLayout::OfDegrees(2, 1, 1));
    std::vector<std::pair<int, int>> raised;
    for (int step = 0; step < 20; ++step) {
      const double machine = !recover && step >= 9 ? 1.6 : 1.0;
      AddStep(c, 0, step, 0.001 * machine);
      AddStep(c, 1, step, (recover && step >= 9 ? 0.001 : 0.004) * machine);
      for (const v1::HealthEvent& e : c.Evaluate(step)) raised.push_back({e.rank(), e.step()});
    }
    EXPECT_EQ(raised, (std::vector<std::pair<int, int>>{{1, 5}})) << (recover ? "recovery" : "machine-wide");
  }
}

TEST(StragglerCheck, ContentionThatSlowsEveryActionButOneOrOneKindOrEveryRankIsNotAStraggler) {
  StragglerCheck c(jobplan::HealthSettings(), RankLayout::OfDegrees(4, 1, 1));
  for (int step = 0; step < 40; ++step) {
    for (int g = 0; g < 4; ++g) {
      // Rank 0: every action but the fastest of each kind 3x as long (descheduled), every step.
      // Rank 3: its forwards 2x for 10 steps (they overlap its neighbours' work), its backwards not.
      // Steps 20-29: the whole machine 2x slower (another job compiling).
      const double machine = step >= 20 && step < 30 ? 2 : 1;
      const bool f_slow = g == 3 && step >= 8 && step < 18;
      for (int k = 0; k < 4; ++k) {
        const double v = 0.001 * machine * (g == 0 && k > 0 ? 3 : 1);
        c.Add(g, step, v1::F, f_slow ? 2 * v : v, 2);
        c.Add(g, step, v1::B, 1.2 * v, 2);
      }
    }
    EXPECT_TRUE(c.Evaluate(step).empty()) << step;
  }
}

TEST(StragglerCheck, OneStepUnderTheThresholdIsNotPersistent) {
  StragglerCheck c(jobplan::HealthSettings(), RankLayout::OfDegrees(2, 1, 1));
  for (int step = 0; step < 20; ++step) {
    // Rank 1 is 3x slower every third step from step 6: a window of 3 steps always holds fast
    // steps too, and its fastest action is a fast one.
    for (int g = 0; g < 2; ++g) AddStep(c, g, step, g == 1 && step % 3 == 0 && step >= 6 ? 0.003 : 0.001);
    EXPECT_TRUE(c.Evaluate(step).empty()) << step;
  }
  // A window made only of slow steps, once: one step under the threshold, no event.
  StragglerCheck d(jobplan::HealthSettings(), RankLayout::OfDegrees(2, 1, 1));
  for (int step = 0; step < 20; ++step) {
    for (int g = 0; g < 2; ++g) AddStep(d, g, step, g == 1 && step >= 8 && step < 11 ? 0.003 : 0.001);
    auto e = d.Evaluate(step);
    EXPECT_TRUE(e.empty()) << step << ": " << (e.empty() ? "" : e[0].message());
  }
}

TEST(StragglerCheck, TwoSlowStepsOfThreeRaiseOneEventPerEpisode) {
  jobplan::HealthSettings s;
  s.straggler_window = 1;  // each step's pace alone, so the test sets it step by step
  StragglerCheck c(s, RankLayout::OfDegrees(4, 1, 1));
  //                   steps 0-3: baseline      4  5  6  7  8  9 10 11 12
  const std::vector<int> slow = {0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0, 1, 1};
  std::vector<int> raised;
  for (int step = 0; step < static_cast<int>(slow.size()); ++step) {
    for (int g = 0; g < 4; ++g) AddStep(c, g, step, g == 1 && slow[step] ? 0.002 : 0.001);
    for (const v1::HealthEvent& e : c.Evaluate(step)) {
      EXPECT_EQ(e.rank(), 1);
      raised.push_back(step);
    }
  }
  // Step 6: slow in 2 of the last 3 (4 and 6). Steps 7-9 alternate: the same episode. Steps 9
  // and 10 are fine, window + 1 in a row: the episode ends; 11 and 12 raise a new one.
  EXPECT_EQ(raised, (std::vector<int>{6, 12}));
}

TEST(StragglerCheck, ASlowdownUnderTheMinimumDeltaIsNotAStraggler) {
  jobplan::HealthSettings s;
  s.straggler_min_delta_s = 0.001;
  StragglerCheck c(s, RankLayout::OfDegrees(2, 1, 1));
  for (int step = 0; step < 10; ++step) {
    AddStep(c, 0, step, 0.0001);
    AddStep(c, 1, step, 0.0003);  // 3x, but 0.2 ms per cost unit x 2 units: 0.4 ms per action
    EXPECT_TRUE(c.Evaluate(step).empty());
  }
}

TEST(StragglerCheck, AJobWithOneRankHasNoPeersAndIsNeverFlagged) {
  StragglerCheck c(jobplan::HealthSettings(), RankLayout::OfDegrees(1, 1, 1));
  for (int step = 0; step < 20; ++step) {
    AddStep(c, 0, step, step < 10 ? 0.001 : 0.003);
    EXPECT_TRUE(c.Evaluate(step).empty());
  }
  for (const StragglerScore& sc : c.scores()) EXPECT_EQ(sc.individual, 1.0);
}

// A lasting 1.3x slowdown scores 1/1.3 = 0.77, above the threshold: the change-point rule finds
// it. The window holds only slow steps from step 12 (the fault starts at 10); from there each step
// adds log(1.3) - log(1.3)/2 = 0.1312 to the statistic, over the limit 0.8 at the 7th: step 18.
TEST(StragglerCheck, ALasting1point3xSlowdownIsFoundByTheChangePointRule) {
  StragglerCheck c(jobplan::HealthSettings(), RankLayout::OfDegrees(4, 1, 1));
  int flagged_at = -1;
  std::string message;
  for (int step = 0; step < 40; ++step) {
    for (int g = 0; g < 4; ++g) AddStep(c, g, step, g == 1 && step >= 10 ? 0.0013 : 0.001, 1.5);
    for (const v1::HealthEvent& e : c.Evaluate(step)) {
      EXPECT_EQ(flagged_at, -1) << "one event per episode: " << e.message();
      flagged_at = step;
      message = e.message();
      EXPECT_EQ(e.rank(), 1);
    }
    for (const StragglerScore& sc : c.scores()) EXPECT_GT(sc.individual, 0.7) << step;  // the scores stay quiet
  }
  EXPECT_EQ(flagged_at, 18);
  EXPECT_EQ(message,
            "straggler: rank 1 (dp 0) at step 18: slower than its own baseline in every kind of action since step 12 "
            "while the other ranks are not: a lasting change (cumulative log-slowdown 0.918 > 0.800; fastest action per "
            "cost unit in the last 3 steps: F 1.300 vs its baseline 1.000 ms, the others x1.00, B 1.560 vs its "
            "baseline 1.200 ms, the others x1.00)");
}

// What the change-point rule must not flag: 1.1x for good (under its drift), the whole machine
// 1.3x slower, a rank 2x slower in one kind only, and 2x for 3 steps then back (a burst: one
// window, one capped step of evidence).
TEST(StragglerCheck, TheChangePointRuleLeavesSmallShiftsMachineWideOnesAndBurstsAlone) {
  StragglerCheck c(jobplan::HealthSettings(), RankLayout::OfDegrees(4, 1, 1));
  for (int step = 0; step < 80; ++step) {
    const double machine = step >= 30 && step < 50 ? 1.3 : 1.0;
    for (int g = 0; g < 4; ++g) {
      const double pace = 0.001 * machine * (g == 1 && step >= 10 ? 1.1 : 1.0) *
                          (g == 2 && step >= 60 && step < 63 ? 2.0 : 1.0);
      for (int k = 0; k < 4; ++k) {
        c.Add(g, step, v1::F, g == 3 && step >= 10 ? 2 * pace : pace, 2);
        c.Add(g, step, v1::B, 1.2 * pace, 2);
      }
    }
    const auto events = c.Evaluate(step);
    EXPECT_TRUE(events.empty()) << step << ": " << (events.empty() ? "" : events[0].message());
  }
}

// The pp 2 blind spot for the change-point rule too: rank 1 slow from the start (flagged by its
// relative score at step 5, its new baseline taken after), then rank 0 slows down 1.3x: flagged.
TEST(StragglerCheck, TheChangePointRuleFindsASlowdownAfterTheOnlyPeerWasFlagged) {
  StragglerCheck c(jobplan::HealthSettings(), RankLayout::OfDegrees(2, 1, 1));
  std::vector<std::pair<int, int>> raised;
  for (int step = 0; step < 40; ++step) {
    AddStep(c, 0, step, step >= 14 ? 0.0013 : 0.001);
    AddStep(c, 1, step, 0.004);
    for (const v1::HealthEvent& e : c.Evaluate(step)) raised.push_back({e.rank(), e.step()});
  }
  EXPECT_EQ(raised, (std::vector<std::pair<int, int>>{{1, 5}, {0, 22}}));
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
  BubbleCheck b(s, e, RankLayout::OfDegrees(2, 1, 1));
  EXPECT_DOUBLE_EQ(b.Limit(0.001), 0.05);
  EXPECT_FALSE(b.OnRankStep(0, 3, Timings(job.plan(), e, 0, 0.001, -1, 0, -1), 0.001));
  // Rank 0's BW0 (slot 2) waits 80 ms for rank 1's gradient where the plan predicts 2 ms: once
  // is a late input, not yet an event; then a normal step re-arms the count.
  EXPECT_FALSE(b.OnRankStep(0, 3, Timings(job.plan(), e, 0, 0.001, 2, 0.080, 1), 0.001));
  EXPECT_FALSE(b.OnRankStep(0, 3, Timings(job.plan(), e, 0, 0.001, -1, 0, -1), 0.001));
  EXPECT_FALSE(b.OnRankStep(0, 3, Timings(job.plan(), e, 0, 0.001, 2, 0.080, 1), 0.001));
  // Nor is the second step in a row (a loaded machine does that); the third is.
  EXPECT_FALSE(b.OnRankStep(0, 3, Timings(job.plan(), e, 0, 0.001, 2, 0.080, 1), 0.001));
  auto ev = b.OnRankStep(0, 3, Timings(job.plan(), e, 0, 0.001, 2, 0.080, 1), 0.001);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind(), v1::BUBBLE);
  EXPECT_EQ(ev->rank(), 0);
  EXPECT_EQ(ev->step(), 3);
  EXPECT_EQ(ev->message(),
            "bubble: rank 0 (dp 0) step 3: idle 0.082 s before 0BW0 at +0.002 s into the step, predicted 0.002 s "
            "(limit +0.050 s); waited 0.080 s for rank 1 (dp 0)");
  // One event per episode.
  EXPECT_FALSE(b.OnRankStep(0, 3, Timings(job.plan(), e, 0, 0.001, 2, 0.080, 1), 0.001));
  // Warm-up steps and an uncalibrated scale check nothing.
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(b.OnRankStep(1, 0, Timings(job.plan(), e, 1, 0.001, 0, 1.0, 0), 0.001));
    EXPECT_FALSE(b.OnRankStep(1, 3, Timings(job.plan(), e, 1, 0.001, 0, 1.0, 0), 0));
  }
}

}  // namespace
}  // namespace pipecoord::coordinator::health
