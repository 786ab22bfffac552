// Every V schedule builds (generate + communication + validation) and runs to the end over a
// grid of shapes and cost models: p = 2..16, m from p to 4p, with and without communication
// latency, even and uneven F/B/W costs, and W holding all or half of the activations.
// (m: p, p + 1, 2p - 1, 2p, 2p + 1, 3p + 1, 4p: the V fills at 2p - 1 and 2p; each generator
// replays its order with the costs, so every m of p..4p would take minutes.)
#include <gtest/gtest.h>

#include <string>

#include "schedules/test_util.h"

namespace pipecoord::schedules {
namespace {

CostModel Costs(double f, double b, double w, double comm, double w_share = 0.5) {
  CostModel c;
  c.f = f;
  c.b = b;
  c.w = w;
  c.comm = comm;
  c.w_share = w_share;
  return c;
}

class VScheduleGrid : public ::testing::TestWithParam<const char*> {};

TEST_P(VScheduleGrid, BuildsAndFinishes) {
  const std::string name = GetParam();
  const CostModel models[] = {Costs(1, 1, 1, 0), Costs(1, 1, 1, 0.5), Costs(1, 1.2, 0.8, 0),
                              Costs(1, 1.2, 0.8, 0.5), Costs(1, 1.2, 0.8, 0.5, 1.0)};
  for (int p = 2; p <= 16; ++p) {
    for (int m : {p, p + 1, 2 * p - 1, 2 * p, 2 * p + 1, 3 * p + 1, 4 * p}) {
      for (const CostModel& c : models) {
        ScheduleSpec spec = testing::Spec(p, m);
        spec.costs = c;
        auto s = BuildSchedule(name, spec);
        if (name == "dualpipev" && m < 2 * p) {
          ASSERT_FALSE(s.ok());
          EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
          continue;
        }
        ASSERT_TRUE(s.ok()) << name << " p=" << p << " m=" << m << " comm=" << c.comm << " b=" << c.b
                            << ": " << s.status().ToString();
        auto sim = Simulate(*s, c);
        ASSERT_TRUE(sim.ok()) << name << " p=" << p << " m=" << m << ": " << sim.status().ToString();
        // Never faster than the busiest rank's own work, m (f + b + w).
        EXPECT_GE(sim->makespan, m * (c.f + c.b + c.w) - 1e-9);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(VSchedules, VScheduleGrid, ::testing::Values("zbv", "v-half", "v-min", "dualpipev"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::erase(n, '-');
                           return n;
                         });

}  // namespace
}  // namespace pipecoord::schedules
