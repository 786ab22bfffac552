// Helpers for schedule tests: compact text forms that make exact orders easy to assert.
#ifndef PIPECOORD_SCHEDULES_TEST_UTIL_H_
#define PIPECOORD_SCHEDULES_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "schedules/registry.h"
#include "schedules/schedule.h"
#include "schedules/simulator.h"
#include "schedules/validator.h"

namespace pipecoord::schedules::testing {

// "0F0 0F1 0BW0 ..." with the peer appended to communication actions ("0SEND_F0>1").
inline std::string RankText(const std::vector<Action>& list) {
  std::string out;
  for (const Action& a : list) {
    if (!out.empty()) out += ' ';
    out += ToString(a);
    if (IsComm(a.op)) out += (IsSend(a.op) ? ">" : "<") + std::to_string(a.peer);
  }
  return out;
}

inline Schedule MustGenerate(const std::string& name, const ScheduleSpec& spec) {
  auto s = GenerateComputeOrder(name, spec);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : Schedule{};
}

inline Simulation MustSimulate(const Schedule& s, const CostModel& c) {
  auto sim = Simulate(s, c);
  EXPECT_TRUE(sim.ok()) << sim.status().ToString();
  return sim.ok() ? *sim : Simulation{};
}

inline ScheduleSpec Spec(int pp, int m, int vpp = 0) {
  ScheduleSpec spec;
  spec.pp = pp;
  spec.microbatches = m;
  spec.vpp = vpp;
  return spec;
}

// The searches' specs: unit-free F, B, W costs per rank share, comm, W's share of the kept
// activations, and the memory limit (0: the search's default).
using Costs = std::tuple<double, double, double>;
inline ScheduleSpec AutoSpec(int p, int m, Costs fbw, double comm, double w_share, double limit) {
  ScheduleSpec spec = Spec(p, m);
  std::tie(spec.costs.f, spec.costs.b, spec.costs.w) = fbw;
  spec.costs.comm = comm;
  spec.costs.w_share = w_share;
  spec.mem_limit = limit;
  return spec;
}

// A search's shortcut (its baseline returned unsearched when no schedule can be shorter)
// changes no result: over shapes, costs and limits, `search(spec)` returns the very schedule
// `search(spec, false)` (the full search) does, and the shortcut, winning as `baseline`, is taken
// somewhere. Prints how often.
template <typename SearchFn>
void ExpectTheShortcutChangesNothing(SearchFn search, const std::string& baseline) {
  int taken = 0, shapes = 0;
  for (int p : {1, 2, 4, 6}) {
    for (int m : {1, 4, 9, 24}) {
      for (auto [fbw, comm] : {std::pair{Costs{1, 1, 1}, 0.0}, std::pair{Costs{1, 1.2, 0.8}, 0.2}}) {
        for (double limit : {0.0, 2.5}) {
          const ScheduleSpec spec = AutoSpec(p, m, fbw, comm, 0.5, limit);
          const std::string where = "p=" + std::to_string(p) + " m=" + std::to_string(m) + " comm=" +
                                    std::to_string(comm) + " limit=" + std::to_string(limit);
          auto quick = search(spec, true);
          auto full = search(spec, false);
          ASSERT_EQ(quick.ok(), full.ok()) << where;
          if (!quick.ok()) continue;
          ++shapes;
          EXPECT_EQ(quick->schedule.ranks, full->schedule.ranks) << where << " (" << quick->winner << " vs " << full->winner << ")";
          EXPECT_EQ(quick->schedule.stage_to_rank, full->schedule.stage_to_rank) << where;
          EXPECT_DOUBLE_EQ(quick->span, full->span) << where;
          EXPECT_DOUBLE_EQ(quick->makespan, full->makespan) << where;
          EXPECT_EQ(quick->mem_limit, full->mem_limit) << where;
          taken += quick->candidates == 1 && quick->winner == baseline;
        }
      }
    }
  }
  EXPECT_GT(shapes, 40);
  EXPECT_GT(taken, 5) << "of " << shapes;
  std::printf("shortcut taken on %d of %d shapes\n", taken, shapes);
}

}  // namespace pipecoord::schedules::testing

#endif  // PIPECOORD_SCHEDULES_TEST_UTIL_H_
