// The exact reference (exact_schedule.h): checked against a brute force over every set of
// rank orders on the tiniest pipelines and against a span worked out by hand; then the
// heuristic searches (zb-auto, v-auto) measured against it on a grid of small cases.
#include "schedules/exact_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <vector>

#include "schedules/cost_replay.h"
#include "schedules/memory_search.h"
#include "schedules/test_util.h"

namespace pipecoord::schedules {
namespace {

struct Case {
  int p, m;
  double f, b, w, comm, w_share, limit;
};

ScheduleSpec SpecOf(const Case& k) {
  ScheduleSpec spec = testing::Spec(k.p, k.m);
  spec.costs.f = k.f;
  spec.costs.b = k.b;
  spec.costs.w = k.w;
  spec.costs.comm = k.comm;
  spec.costs.w_share = k.w_share;
  spec.mem_limit = k.limit;
  return spec;
}

ExactResult MustSolve(const Case& k, bool v) {
  ExactOptions options;
  options.v_placement = v;
  auto out = ExactShortestSchedule(SpecOf(k), options);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return {};
  EXPECT_TRUE(out->proven) << "p=" << k.p << " m=" << k.m;
  return *out;
}

double Span(const Simulation& sim) { return MeasureStepTime(sim).span; }

// Every order of one rank's actions: each stage's F's, B's and W's in micro-batch order, and
// F(s, k) before B(s, k) before W(s, k).
std::vector<std::vector<Action>> RankOrders(const std::vector<int>& stages, int m) {
  std::vector<std::vector<Action>> out;
  std::vector<Action> list;
  std::vector<int> nf(stages.size(), 0), nb(stages.size(), 0), nw(stages.size(), 0);
  const size_t total = 3 * stages.size() * m;
  std::function<void()> walk = [&] {
    if (list.size() == total) {
      out.push_back(list);
      return;
    }
    for (size_t i = 0; i < stages.size(); ++i) {
      const int s = stages[i];
      if (nf[i] < m) {
        list.push_back({Op::kF, s, nf[i]++});
        walk();
        --nf[i];
        list.pop_back();
      }
      if (nb[i] < nf[i]) {
        list.push_back({Op::kB, s, nb[i]++});
        walk();
        --nb[i];
        list.pop_back();
      }
      if (nw[i] < nb[i]) {
        list.push_back({Op::kW, s, nw[i]++});
        walk();
        --nw[i];
        list.pop_back();
      }
    }
  };
  walk();
  return out;
}

// The shortest span over every combination of rank orders that runs within the limit, timed
// by the simulator: no search, no bound, nothing shared with the branch and bound.
double BruteForce(const Case& k, bool v) {
  Schedule s = v ? MakeSchedule("brute", k.p, 2, k.m, VPlacement(k.p))
                 : MakeSchedule("brute", k.p, 1, k.m, LoopedPlacement(k.p, 1));
  std::vector<std::vector<std::vector<Action>>> orders(k.p);
  for (int r = 0; r < k.p; ++r) {
    std::vector<int> stages;
    for (int st = 0; st < s.num_stages(); ++st) {
      if (s.stage_to_rank[st] == r) stages.push_back(st);
    }
    orders[r] = RankOrders(stages, k.m);
  }
  const CostModel costs = SpecOf(k).costs;
  double best = std::numeric_limits<double>::infinity();
  std::vector<size_t> pick(k.p, 0);
  while (true) {
    for (int r = 0; r < k.p; ++r) s.ranks[r] = orders[r][pick[r]];
    const std::vector<double> peaks = RankPeaks(s, costs);
    if (std::all_of(peaks.begin(), peaks.end(), [&](double x) { return x <= k.limit + 1e-9; })) {
      auto sim = Simulate(s, costs);
      if (sim.ok()) best = std::min(best, Span(*sim));  // else the orders deadlock
    }
    int r = 0;
    while (r < k.p && ++pick[r] == orders[r].size()) pick[r++] = 0;
    if (r == k.p) break;
  }
  return best;
}

// p 2, m 2, f = b = w = 1: rank 0 runs F0 F1, then waits one unit for rank 1's B0 (F0 on
// rank 1 over [1, 2], B0 over [2, 3]), then B0 W0 B1 W1: 6 units of work and 1 idle, 7; no
// order avoids that wait (rank 0 has nothing else to run before a B reaches it).
TEST(ExactScheduleTest, HandCheckedSpan) {
  const Case k = {2, 2, 1, 1, 1, 0, 0.5, 2};
  const ExactResult out = MustSolve(k, false);
  EXPECT_DOUBLE_EQ(out.span, 7);
  const Simulation sim = testing::MustSimulate(out.schedule, SpecOf(k).costs);
  EXPECT_DOUBLE_EQ(Span(sim), 7);
  EXPECT_TRUE(Validate(out.schedule).ok());
}

TEST(ExactScheduleTest, MatchesBruteForce) {
  const Case flat[] = {
      {2, 2, 1, 1, 1, 0, 0.5, 2},     {2, 2, 1, 1, 1, 0, 0.5, 1},   {2, 2, 1, 1.2, 0.8, 0.1, 0.5, 2},
      {2, 3, 1, 1, 1, 0, 0.5, 2},     {2, 3, 1, 1, 1, 0, 0.5, 3},   {2, 3, 1, 1.5, 0.5, 0.2, 0.3, 1.5},
      {2, 3, 1, 1.2, 0.8, 0, 0.5, 4}, {3, 2, 1, 1, 1, 0, 0.5, 2},
  };
  for (const Case& k : flat) {
    const ExactResult out = MustSolve(k, false);
    EXPECT_NEAR(out.span, BruteForce(k, false), 1e-9) << "flat p=" << k.p << " m=" << k.m << " limit " << k.limit;
  }
  const Case vee[] = {{2, 1, 1, 1, 1, 0, 0.5, 1}, {2, 1, 1, 1.2, 0.8, 0.1, 0.5, 1}, {2, 1, 1, 1, 1, 0, 0.5, 2}};
  for (const Case& k : vee) {
    const ExactResult out = MustSolve(k, true);
    EXPECT_NEAR(out.span, BruteForce(k, true), 1e-9) << "V p=" << k.p << " m=" << k.m << " limit " << k.limit;
  }
}

// The heuristic's span against the optimum: seeded with the heuristic's schedule, the branch
// and bound proves it optimal or finds a shorter one. Returns the gap (heuristic / optimum - 1).
double Gap(const Case& k, bool v, double* exact_span) {
  const ScheduleSpec spec = SpecOf(k);
  auto found = v ? SearchVAuto(spec) : SearchZbAuto(spec);
  EXPECT_TRUE(found.ok()) << found.status().ToString();
  if (!found.ok()) return 1e9;
  ExactOptions options;
  options.v_placement = v;
  options.start = &found->schedule;
  auto exact = ExactShortestSchedule(spec, options);
  EXPECT_TRUE(exact.ok()) << exact.status().ToString();
  if (!exact.ok()) return 1e9;
  EXPECT_TRUE(exact->proven) << (v ? "V" : "flat") << " p=" << k.p << " m=" << k.m << " limit " << k.limit;
  EXPECT_LE(exact->span, found->span + 1e-9);  // nothing beats the optimum
  *exact_span = exact->span;
  const double gap = found->span / exact->span - 1;
  std::printf("%-4s p%d m%d f%g b%g w%g comm %g limit %g: heuristic %g, optimum %g, gap %.2f%%\n", v ? "V" : "flat", k.p,
              k.m, k.f, k.b, k.w, k.comm, k.limit, found->span, exact->span, 100 * gap);
  return gap;
}

struct Costs {
  double f, b, w, comm;
};
constexpr Costs kGridCosts[] = {{1, 1, 1, 0}, {1, 1.2, 0.8, 0.1}, {1, 1.5, 0.5, 0}};

// zb-auto is optimal on every case of the grid: p 2-4, m 4 and 6, three cost models, limits
// of one micro-batch, 1F1B's (p) and ZB-H2's (2p), except the two that the branch and bound
// does not finish in seconds (p 4, m 6, limit 4, uneven costs).
TEST(ExactScheduleTest, ZbAutoIsOptimalOnSmallCases) {
  double worst = 0;
  int cases = 0;
  for (int p : {2, 3, 4}) {
    for (int m : {4, 6}) {
      for (const Costs& c : kGridCosts) {
        for (double limit : {1.0, 1.0 * p, 2.0 * p}) {
          if (p == 4 && m == 6 && limit == 4 && c.b != 1) continue;  // not proven within the node limit
          double exact = 0;
          worst = std::max(worst, Gap({p, m, c.f, c.b, c.w, c.comm, 0.5, limit}, false, &exact));
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 52);
  EXPECT_NEAR(worst, 0, 1e-9);
}

// v-auto against the optimum on p 2-3, m 2-3 (p 2 also m 4), the same costs, limits of one
// micro-batch, 1.5 and ZB-V's (p). Where memory is tight and costs uneven it leaves up to
// 11.1% (p 2, m 3, b 1.5, w 0.5, limit 1.5: 12.5 against 11.25); elsewhere mostly optimal.
TEST(ExactScheduleTest, VAutoGapOnSmallCases) {
  double worst = 0, sum = 0;
  int cases = 0, optimal = 0;
  for (int p : {2, 3}) {
    for (int m : {2, 3, 4}) {
      for (const Costs& c : kGridCosts) {
        for (double limit : {1.0, 1.5, 1.0 * p}) {
          const bool hard = (p == 3 && m >= 3 && !(limit == p || (limit == 1 && m == 3))) ||
                            (p == 3 && m == 4) || (p == 2 && m == 4 && c.b != 1 && limit > 1);
          if (hard) continue;  // not proven within the node limit
          double exact = 0;
          const double gap = Gap({p, m, c.f, c.b, c.w, c.comm, 0.5, limit}, true, &exact);
          worst = std::max(worst, gap);
          sum += gap;
          optimal += gap < 1e-9;
          ++cases;
        }
      }
    }
  }
  std::printf("v-auto: %d cases, %d optimal, mean gap %.2f%%, worst %.2f%%\n", cases, optimal, 100 * sum / cases,
              100 * worst);
  EXPECT_EQ(cases, 38);
  EXPECT_NEAR(worst, 12.5 / 11.25 - 1, 1e-9);
}

// Optima asserted exactly (each proven by the search; the first two also by hand and brute
// force above at smaller m): V p 2, m 2, f = b = w = 1, limit 1: 8.5; p 2, m 3, f 1, b 1.5,
// w 0.5, limit 1.5: 11.25; flat p 4, m 6, f = b = w = 1, limit 4 (1F1B's memory): 21.
TEST(ExactScheduleTest, ExactOptima) {
  EXPECT_NEAR(MustSolve({2, 2, 1, 1, 1, 0, 0.5, 1}, true).span, 8.5, 1e-9);
  EXPECT_NEAR(MustSolve({2, 3, 1, 1.5, 0.5, 0, 0.5, 1.5}, true).span, 11.25, 1e-9);
  EXPECT_NEAR(MustSolve({4, 6, 1, 1, 1, 0, 0.5, 4}, false).span, 21, 1e-9);
}

TEST(ExactScheduleTest, RefusesBadInput) {
  ScheduleSpec spec = testing::Spec(2, 2);
  spec.mem_limit = 0.5;
  EXPECT_EQ(ExactShortestSchedule(spec).status().code(), Code::kInvalidArgument);
  spec.mem_limit = -1;
  EXPECT_EQ(ExactShortestSchedule(spec).status().code(), Code::kInvalidArgument);
  spec = testing::Spec(0, 2);
  EXPECT_EQ(ExactShortestSchedule(spec).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace pipecoord::schedules
