// BestReplay's shortcut (an order at the least step time is returned unreplayed) changes no
// result, and LeastStepTime is a lower bound: over shapes and costs, every generated order's
// replay with the shortcut is the very schedule the eleven replays give without it, the bound is
// at or below every simulated schedule's span and makespan, and the shortcut is taken somewhere
// (else this test proves nothing).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "schedules/cost_replay.h"
#include "schedules/test_util.h"

namespace pipecoord::schedules {
namespace {

using testing::AutoSpec;
using testing::Costs;
using testing::MustGenerate;
using testing::MustSimulate;

TEST(BestReplayTest, TheShortcutChangesNothingAndTheBoundHolds) {
  int taken = 0, orders = 0, improved = 0;
  for (const std::string name : {"zbv", "v-half", "v-min", "zbh1"}) {
    for (int p : {2, 3, 4, 6}) {
      for (int m : {1, 2, 3, 4, 8, 16}) {
        for (auto [fbw, comm] : {std::pair{Costs{1, 1, 1}, 0.0}, std::pair{Costs{1, 1.2, 0.8}, 0.2}}) {
          ScheduleSpec spec = AutoSpec(p, m, fbw, comm, 0.5, 0);
          if (name == "zbv" || name == "v-half" || name == "v-min") spec.vpp = 2;
          const std::string where = name + " p=" + std::to_string(p) + " m=" + std::to_string(m) +
                                    " comm=" + std::to_string(comm);
          auto generated = GenerateComputeOrder(name, spec);
          if (!generated.ok()) continue;  // a shape the schedule does not take
          // The generated order (already replayed by its generator where it replays), and the
          // same with every rank's W's moved to its end: an order the replays improve on.
          Schedule w_last = *generated;
          for (std::vector<Action>& list : w_last.ranks) {
            std::stable_partition(list.begin(), list.end(), [](const Action& a) { return a.op != Op::kW; });
          }
          for (const Schedule* order : {&*generated, &w_last}) {
            ++orders;
            const std::vector<double> limits = RankPeaks(*order, spec.costs);
            auto quick = BestReplay(*order, spec.costs, limits, true);
            auto full = BestReplay(*order, spec.costs, limits, false);
            ASSERT_TRUE(quick.ok()) << where << ": " << quick.status().ToString();
            ASSERT_TRUE(full.ok()) << where << ": " << full.status().ToString();
            EXPECT_EQ(quick->ranks, full->ranks) << where << (order == &w_last ? " (W's last)" : "");
            const StepTime least = LeastStepTime(*order, ResolveCosts(spec.costs, *order));
            for (const Schedule* s : {order, static_cast<const Schedule*>(&*full)}) {
              const StepTime t = MeasureStepTime(MustSimulate(*s, spec.costs));
              EXPECT_LE(least.span, t.span * (1 + 1e-9)) << where;
              EXPECT_LE(least.makespan, t.makespan * (1 + 1e-9)) << where;
            }
            taken += ReachesLeastStepTime(MeasureStepTime(MustSimulate(*order, spec.costs)), least);
            improved += full->ranks != order->ranks;
          }
        }
      }
    }
  }
  EXPECT_GT(orders, 0);
  EXPECT_GT(taken, 0) << "no order reached the least step time: the shortcut was never taken";
  EXPECT_GT(improved, 0) << "no replay beat its order: the comparison proves nothing";
  std::printf("shortcut taken on %d of %d orders; the replays beat %d of them\n", taken, orders, improved);
}

// Under unit costs (a rank's F, B and W of a micro-batch take 1 each), the least makespan by hand:
// flat, the last rank waits p - 1 and then works 3 m; stage 0's first B comes at 2 p - 1 (p F's,
// p - 1 B's) and its 2 m of B and W follow. On the V (two chunks a rank, 1/2 each): rank 0 holds
// stage 0, whose first B comes at 2 p - 1/2, then m of its B's and W's; rank p - 1 holds stages
// p - 1 and p, whose first B's come at 3 p / 2 and 3 p / 2 - 1/2, then 2 m; its first input comes at
// (p - 1) / 2, then 3 m. With few micro-batches the way back binds, and a schedule reaches it
// (zbh1 at p 8, m 4: 23).
TEST(BestReplayTest, LeastMakespanUnderUnitCostsIsTheFormula) {
  for (int p : {2, 4, 8}) {
    for (int m : {1, 2, 4, 8, 16}) {
      for (bool vee : {false, true}) {
        ScheduleSpec spec = AutoSpec(p, m, Costs{1, 1, 1}, 0.0, 0.5, 0);
        spec.vpp = vee ? 2 : 1;
        auto order = GenerateComputeOrder(vee ? "zbv" : "zb-auto", spec);
        ASSERT_TRUE(order.ok()) << order.status().ToString();
        const StepTime least = LeastStepTime(*order, ResolveCosts(spec.costs, *order));
        const double want = vee ? std::max({3.0 * m + (p - 1) / 2.0, 2.0 * p - 0.5 + m, 1.5 * p - 0.5 + 2.0 * m})
                                : std::max(3.0 * m + p - 1, 2.0 * p - 1 + 2.0 * m);
        EXPECT_DOUBLE_EQ(least.makespan, want) << (vee ? "V" : "flat") << " p " << p << " m " << m;
        EXPECT_DOUBLE_EQ(least.span, 3.0 * m);
      }
    }
  }
  ScheduleSpec spec = AutoSpec(8, 4, Costs{1, 1, 1}, 0.0, 0.5, 0);
  EXPECT_DOUBLE_EQ(MeasureStepTime(MustSimulate(MustGenerate("zbh1", spec), spec.costs)).makespan, 23.0);
}

}  // namespace
}  // namespace pipecoord::schedules
