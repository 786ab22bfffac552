// zb-auto: never over its memory limit, never slower than zbh1 where zbh1 fits (in the longest
// rank span, what the search minimises), better when memory allows, comm-aware, and clear
// refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "schedules/test_util.h"
#include "schedules/cost_replay.h"
#include "schedules/memory_search.h"
#include "schedules/zb_list_scheduler.h"

namespace pipecoord::schedules {
namespace {

using testing::MustSimulate;
using testing::Spec;

using testing::AutoSpec;
using testing::Costs;

double LongestSpan(const Simulation& sim) {
  double span = 0;
  for (const RankStats& r : sim.ranks) span = std::max(span, r.last_end - r.first_start);
  return span;
}

double MaxPeak(const Simulation& sim) {
  double peak = 0;
  for (const RankStats& r : sim.ranks) peak = std::max(peak, r.peak_activations);
  return peak;
}

// The property the generator promises, on one spec: it builds (comm pass + validator), its
// simulated peak stays within the limit on every rank, its span and makespan are what the
// search says, and where zbh1 fits the limit its span is no longer than zbh1's.
void CheckAuto(const ScheduleSpec& spec) {
  const std::string where = "p=" + std::to_string(spec.pp) + " m=" + std::to_string(spec.microbatches) +
                            " f,b,w=" + std::to_string(spec.costs.f) + "," + std::to_string(spec.costs.b) +
                            "," + std::to_string(spec.costs.w) + " comm=" + std::to_string(spec.costs.comm) +
                            " w_share=" + std::to_string(spec.costs.w_share) +
                            " limit=" + std::to_string(spec.mem_limit);
  auto built = BuildSchedule("zb-auto", spec);
  ASSERT_TRUE(built.ok()) << where << ": " << built.status().ToString();
  auto found = SearchZbAuto(spec);
  ASSERT_TRUE(found.ok()) << where;
  const double limit = spec.mem_limit > 0 ? spec.mem_limit : spec.pp;
  EXPECT_EQ(found->mem_limit, limit) << where;

  Simulation sim = MustSimulate(*built, spec.costs);
  for (int r = 0; r < spec.pp; ++r) {
    EXPECT_LE(sim.ranks[r].peak_activations, limit) << where << " rank " << r;
  }
  EXPECT_DOUBLE_EQ(sim.makespan, found->makespan) << where << " (" << found->winner << ")";
  EXPECT_DOUBLE_EQ(LongestSpan(sim), found->span) << where << " (" << found->winner << ")";

  Schedule zbh1 = testing::MustGenerate("zbh1", spec);
  Simulation zsim = MustSimulate(zbh1, spec.costs);
  bool zbh1_fits = true;
  for (const RankStats& r : zsim.ranks) zbh1_fits &= r.peak_activations <= limit;
  EXPECT_EQ(found->baseline, "zbh1");
  if (zbh1_fits) {
    EXPECT_LE(LongestSpan(sim), LongestSpan(zsim)) << where << " (" << found->winner << ")";
    EXPECT_DOUBLE_EQ(found->baseline_span, LongestSpan(zsim)) << where;
  } else {
    EXPECT_EQ(found->baseline_span, -1) << where;
  }
}

TEST(ZbAutoTest, NeverOverTheLimitNeverSlowerThanZbh1) {
  for (int p : {2, 3, 5, 8}) {
    for (int m : {p, 2 * p + 1, 3 * p}) {
      for (Costs fbw : {Costs{1, 1, 1}, Costs{1, 1.2, 0.8}, Costs{1, 2, 1}, Costs{1, 1, 2}}) {
        for (double limit : {1.0, 1.5, 2.0, p / 2.0, p - 0.5, 0.0, p + 0.5, 1.5 * p, 2.0 * p - 1, 2.0 * p}) {
          if (limit != 0 && limit < 1) continue;
          CheckAuto(AutoSpec(p, m, fbw, 0, 0.5, limit));
        }
      }
    }
  }
}

TEST(ZbAutoTest, CommunicationAndWShareAreRespected) {
  for (int p : {3, 6}) {
    for (int m : {p - 1, 2 * p, 4 * p}) {
      for (double comm : {0.25, 1.0}) {
        for (double w_share : {0.0, 0.25, 1.0}) {
          for (double limit : {1.0, 2.0, 0.0, 1.5 * p, 2.0 * p}) {
            CheckAuto(AutoSpec(p, m, {1, 1.2, 0.8}, comm, w_share, limit));
          }
        }
      }
    }
  }
}

TEST(ZbAutoTest, FewerMicroBatchesThanRanksAndTinyShapes) {
  for (auto [p, m] : {std::pair{1, 1}, std::pair{1, 5}, std::pair{4, 1}, std::pair{6, 3}, std::pair{2, 1},
                      std::pair{128, 3}}) {
    for (double limit : {1.0, 0.0, 3.0}) CheckAuto(AutoSpec(p, m, {1, 1, 1}, 0.1, 0.5, limit));
  }
}

// Uneven stages (a heavier last stage) and a straggler: the limit still holds on every rank.
TEST(ZbAutoTest, UnevenStagesAndStragglers) {
  ScheduleSpec spec = AutoSpec(4, 12, {1, 1.2, 0.8}, 0.2, 0.5, 3.0);
  spec.costs.stage_fraction = {0.8, 1.0, 1.0, 1.2};
  spec.costs.rank_slowdown = {1.0, 1.5, 1.0, 1.0};
  auto built = BuildSchedule("zb-auto", spec);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  Simulation sim = MustSimulate(*built, spec.costs);
  for (int r = 0; r < 4; ++r) EXPECT_LE(sim.ranks[r].peak_activations, 3.0) << r;
  auto found = SearchZbAuto(spec);
  ASSERT_TRUE(found.ok());
  EXPECT_DOUBLE_EQ(found->makespan, sim.makespan);
  EXPECT_DOUBLE_EQ(found->span, LongestSpan(sim));
}

// Memory between 1F1B's and ZB-H2's buys time: zb-auto beats zbh1 there, and once zbh2 fits
// it is at least as fast as zbh2.
TEST(ZbAutoTest, UsesTheMemoryItIsGiven) {
  for (Costs fbw : {Costs{1, 1.2, 0.8}, Costs{1, 2, 1}}) {
    for (double comm : {0.0, 0.3}) {
      const int p = 8, m = 32;
      ScheduleSpec spec = AutoSpec(p, m, fbw, comm, 0.5, 1.5 * p);
      auto found = SearchZbAuto(spec);
      ASSERT_TRUE(found.ok());
      EXPECT_LT(found->span, found->baseline_span) << found->winner;

      spec.mem_limit = 2 * p - 1;  // zbh2's peak on rank 0
      found = SearchZbAuto(spec);
      ASSERT_TRUE(found.ok());
      Simulation zbh2 = MustSimulate(testing::MustGenerate("zbh2", spec), spec.costs);
      EXPECT_LE(MaxPeak(zbh2), spec.mem_limit);
      EXPECT_LE(found->span, LongestSpan(zbh2)) << found->winner;
    }
  }
}

// With f = b = w and 1F1B's memory, zbh1's span m t + (p - 1) f is already the least any
// schedule can take (rank 0 holds at most p forwards before its first B, which cannot start
// before p f + (p - 1) b), and its makespan too: zb-auto keeps it.
TEST(ZbAutoTest, MatchesTheLowerBoundWhenZbh1Does) {
  for (int p : {2, 4, 8}) {
    auto found = SearchZbAuto(AutoSpec(p, 4 * p, {1, 1, 1}, 0, 0.5, 0));
    ASSERT_TRUE(found.ok());
    EXPECT_DOUBLE_EQ(found->span, 4 * p * 3.0 + (p - 1));
    EXPECT_DOUBLE_EQ(found->makespan, 4 * p * 3.0 + (p - 1));
  }
}

// The least memory any schedule needs is one micro-batch on a rank: a limit of exactly that
// runs each rank F, B, W one micro-batch at a time.
TEST(ZbAutoTest, LimitOfOneMicroBatch) {
  ScheduleSpec spec = AutoSpec(4, 6, {1, 1, 1}, 0, 0.5, 1.0);
  auto built = BuildSchedule("zb-auto", spec);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  Simulation sim = MustSimulate(*built, spec.costs);
  for (const RankStats& r : sim.ranks) EXPECT_DOUBLE_EQ(r.peak_activations, 1.0);
}

TEST(ZbAutoTest, RefusesALimitBelowOneMicroBatch) {
  auto s = GenerateComputeOrder("zb-auto", AutoSpec(4, 8, {1, 1, 1}, 0, 0.5, 0.5));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "mem-limit (--mem-limit): must be >= 1, one micro-batch's activations on a rank, the "
            "least any schedule holds; got 0.5");

  ScheduleSpec uneven = AutoSpec(2, 4, {1, 1, 1}, 0, 0.5, 1.2);
  uneven.costs.stage_fraction = {0.5, 1.5};
  s = GenerateComputeOrder("zb-auto", uneven);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--mem-limit"), std::string::npos);
  EXPECT_NE(s.status().message().find(">= 1.5"), std::string::npos);
  uneven.mem_limit = 1.5;
  EXPECT_TRUE(BuildSchedule("zb-auto", uneven).ok());
}

TEST(ZbAutoTest, RefusesBadInput) {
  auto s = GenerateComputeOrder("zb-auto", Spec(2, 4, 2));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "vpp: schedule zb-auto places exactly 1 chunk(s) per rank, got 2");

  ScheduleSpec spec = AutoSpec(2, 4, {1, 1, 1}, 0, 0.5, std::nan(""));
  spec.vpp = 1;
  auto direct = GenerateZbAuto(spec);
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(direct.status().code(), Code::kInvalidArgument);
  EXPECT_NE(direct.status().message().find("mem-limit"), std::string::npos);

  spec = AutoSpec(2, 4, {1, -1, 1}, 0, 0.5, 0);
  spec.vpp = 1;
  direct = GenerateZbAuto(spec);
  ASSERT_FALSE(direct.ok());
  EXPECT_NE(direct.status().message().find("cost-b"), std::string::npos);
}

// The list scheduler's own promises: its planned makespan is the simulator's, and it keeps
// the limit, for any warm-up depths (even ones growing down the pipeline).
TEST(ZbListSchedulerTest, PlansWhatTheSimulatorTimesWithinTheLimit) {
  const int p = 5, m = 11;
  Schedule shape = MakeSchedule("list", p, 1, m, LoopedPlacement(p, 1));
  for (double comm : {0.0, 0.4}) {
    CostModel costs;
    costs.f = 1;
    costs.b = 1.3;
    costs.w = 0.6;
    costs.comm = comm;
    const StageCosts c = ResolveCosts(costs, shape);
    for (const std::vector<int>& depths :
         {std::vector<int>{5, 4, 3, 2, 1}, std::vector<int>{1, 2, 3, 4, 5}, std::vector<int>{9, 9, 9, 9, 9}}) {
      for (double fill : {0.0, 1.0}) {
        for (bool alternate : {false, true}) {
          for (double limit : {1.0, 2.5, 5.0, 9.0}) {
            ListPolicy policy;
            policy.max_in_flight = depths;
            policy.fill_ratio = fill;
            policy.alternate = alternate;
            auto out = RunListScheduler(c, p, m, limit, policy);
            ASSERT_TRUE(out.ok()) << out.status().ToString();
            shape.ranks = out->ranks;
            ASSERT_TRUE(Validate(shape).ok());
            Simulation sim = MustSimulate(shape, costs);
            EXPECT_DOUBLE_EQ(sim.makespan, out->makespan);
            EXPECT_LE(MaxPeak(sim), limit);
          }
        }
      }
    }
  }
}

// The shortcut (the baseline returned unsearched when no schedule can be shorter) changes no
// result.
TEST(ZbAutoTest, TheShortcutReturnsWhatTheSearchFinds) {
  testing::ExpectTheShortcutChangesNothing([](const ScheduleSpec& spec, bool shortcut) { return SearchZbAuto(spec, shortcut); }, "zbh1");
}

// With least_makespan_suffices (the planner's profiles) a search may stop once it holds a schedule
// at the least makespan (LeastStepTime), the baseline unsearched or mid-search: against the full
// search (shortcut off, flag off) the result still fits the limit, is never longer in the
// makespan, is at the least makespan wherever it stopped early, and elsewhere is the full
// search's very schedule. At unit costs zbh1 reaches the least makespan, so it fires there where
// the span-first shortcut does not (rank 0 of zbh1 idles); with few micro-batches v-auto finds the
// way back's bound mid-search.
TEST(ZbAutoTest, LeastMakespanSufficesKeepsTheLeastMakespan) {
  for (bool vee : {false, true}) {
    int fired = 0, fired_only_by_flag = 0, fired_mid_search = 0, shapes = 0;
    for (int p : {2, 4, 6, 8}) {
      for (int m : {3, 4, 9, 24}) {
        for (auto [fbw, comm] : {std::pair{Costs{1, 1, 1}, 0.0}, std::pair{Costs{1, 1.2, 0.8}, 0.2}}) {
          for (double limit : {0.0, 2.5}) {
            ScheduleSpec spec = AutoSpec(p, m, fbw, comm, 0.5, limit);
            if (vee) spec.vpp = 2;
            const std::string where = std::string(vee ? "v-auto" : "zb-auto") + " p=" + std::to_string(p) +
                                      " m=" + std::to_string(m) + " comm=" + std::to_string(comm) +
                                      " limit=" + std::to_string(limit);
            auto search = [vee](const ScheduleSpec& s, bool shortcut) {
              return vee ? SearchVAuto(s, shortcut) : SearchZbAuto(s, shortcut);
            };
            auto full = search(spec, /*shortcut=*/false);
            auto span_first = search(spec, true);
            spec.least_makespan_suffices = true;
            auto quick = search(spec, true);
            ASSERT_EQ(quick.ok(), full.ok()) << where;
            if (!quick.ok()) continue;
            ++shapes;
            Schedule shape = vee ? MakeSchedule("v-auto", p, 2, m, VPlacement(p))
                                 : MakeSchedule("zb-auto", p, 1, m, LoopedPlacement(p, 1));
            shape.ranks = quick->schedule.ranks;
            const Simulation sim = MustSimulate(shape, spec.costs);
            EXPECT_LE(MaxPeak(sim), quick->mem_limit + 1e-9) << where;
            EXPECT_DOUBLE_EQ(sim.makespan, quick->makespan) << where;
            EXPECT_LE(quick->makespan, full->makespan + 1e-9 * full->makespan) << where;
            const double least = LeastStepTime(shape, ResolveCosts(spec.costs, shape)).makespan;
            const bool at_least = ReachesLeastStepTime(StepTime{0, quick->makespan}, StepTime{0, least});
            if (quick->candidates < full->candidates) {
              EXPECT_TRUE(at_least) << where << ": stopped early short of the least makespan";
              ++fired;
              fired_only_by_flag += span_first->candidates > 1;
              fired_mid_search += quick->candidates > 1;
            } else {
              EXPECT_EQ(quick->schedule.ranks, full->schedule.ranks) << where;
            }
          }
        }
      }
    }
    EXPECT_GT(shapes, 30);
    EXPECT_GT(fired_only_by_flag, 5) << "of " << shapes;
    if (vee) {
      EXPECT_GT(fired_mid_search, 0) << "of " << shapes;
    }
    std::printf("%s: least makespan sufficed on %d of %d shapes, %d where the span-first shortcut searched, %d mid-search\n",
                vee ? "v-auto" : "zb-auto", fired, shapes, fired_only_by_flag, fired_mid_search);
  }
}

}  // namespace
}  // namespace pipecoord::schedules
