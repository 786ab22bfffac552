// Every registered generator over a grid of shapes (p 2..16, v 1..4 where the schedule takes
// chunks, m p..4p, uneven layers, communication cost): the result passes the validator, the
// simulator finishes, and the simulation conserves work.
#include <gtest/gtest.h>

#include <cmath>

#include "schedules/partition.h"
#include "schedules/test_util.h"

namespace pipecoord::schedules {
namespace {

struct Shape {
  int p, v, m;
  bool uneven_layers;
  double comm;
};

std::vector<Shape> Grid(const ScheduleInfo& info) {
  std::vector<Shape> grid;
  // The searches: fewer shapes (each one is a search of up to a second).
  const bool expensive = std::string(info.name) == "zb-auto" || std::string(info.name) == "v-auto";
  for (int p = 2; p <= 16; p += (expensive ? 3 : 1)) {
    std::vector<int> vs;
    if (info.required_vpp) vs = {info.required_vpp};
    else if (info.default_vpp == 1) vs = {1};
    else vs = {1, 2, 3, 4};
    for (int v : vs) {
      for (int m : {p, p + 1, 2 * p - 1, 2 * p, 3 * p + 1, 4 * p}) {
        if (expensive && m > 2 * p) continue;
        grid.push_back({p, v, m, (p + m) % 2 == 0, (p % 3) * 0.25});
      }
    }
  }
  return grid;
}

TEST(AllSchedulesPropertyTest, EveryGeneratorOverTheGrid) {
  int cases = 0;
  for (const ScheduleInfo& info : AllSchedules()) {
    if (std::string(info.name) == "csv") continue;  // needs a file: csv_format tests cover it
    for (const Shape& sh : Grid(info)) {
      ScheduleSpec spec = testing::Spec(sh.p, sh.m, sh.v);
      spec.costs.f = 1.0;
      spec.costs.b = 1.2;
      spec.costs.w = 0.8;
      spec.costs.comm = sh.comm;
      const std::string what = std::string(info.name) + " p=" + std::to_string(sh.p) +
                               " v=" + std::to_string(sh.v) + " m=" + std::to_string(sh.m) +
                               (sh.uneven_layers ? " uneven" : "") + " comm=" + std::to_string(sh.comm);
      if (std::string(info.name) == "dualpipev" && sh.m < 2 * sh.p) {
        // DualPipeV needs m >= 2p (as its reference asserts): a refusal naming the rule.
        auto refused = BuildSchedule(info.name, spec);
        ASSERT_FALSE(refused.ok()) << what;
        EXPECT_EQ(refused.status().message().rfind("microbatches: dualpipev needs at least 2 x pp", 0), 0u) << what;
        continue;
      }
      // The placement, known before generating, is the one the generator uses.
      auto placed = PlaceStages(info.name, spec);
      ASSERT_TRUE(placed.ok()) << what << ": " << placed.status().ToString();
      if (sh.uneven_layers) {
        // Layers = 2 per stage + 1: not a multiple of the chunks; stage costs follow layers.
        const int stages = static_cast<int>(placed->size());
        auto layers = PartitionLayers(2 * stages + 1, sh.p, *placed);
        ASSERT_TRUE(layers.ok()) << what;
        std::vector<double> costs(layers->begin(), layers->end());
        spec.costs.stage_fraction = StageFractions(costs, sh.p);
      }
      auto s = BuildSchedule(info.name, spec);
      ASSERT_TRUE(s.ok()) << what << ": " << s.status().ToString();
      EXPECT_EQ(s->stage_to_rank, *placed) << what;
      auto sim = Simulate(*s, spec.costs);
      ASSERT_TRUE(sim.ok()) << what << ": " << sim.status().ToString();
      // Work is conserved: all ranks together do m (f+b+w) per rank share.
      double busy = 0;
      for (const RankStats& r : sim->ranks) busy += r.busy;
      EXPECT_NEAR(busy, sh.p * sh.m * 3.0, 1e-6 * busy) << what;
      EXPECT_GE(sim->bubble_rate, -1e-12) << what;
      EXPECT_LT(sim->bubble_rate, 1.0) << what;
      for (const RankStats& r : sim->ranks) {
        EXPECT_LE(r.busy, sim->makespan + 1e-9) << what;
        EXPECT_GT(r.peak_activations, 0) << what;
      }
      ++cases;
    }
  }
  EXPECT_GT(cases, 1000);
}

}  // namespace
}  // namespace pipecoord::schedules
