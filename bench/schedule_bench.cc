// Schedule engine speed: generate + communication pass + validate + simulate, for the shapes
// issue 3 names, each against the same pipeline for plain 1F1B (baseline) in the same run.
//   bazel run -c opt //bench:schedule_bench
#include <cstdio>
#include <string>

#include "bench/bench_util.h"
#include "schedules/registry.h"
#include "schedules/simulator.h"

namespace {

using namespace pipecoord::schedules;

// The full pipeline a plan goes through; returns the bubble rate so nothing is optimised away.
double Pipeline(const std::string& name, int p, int v, int m) {
  ScheduleSpec spec;
  spec.pp = p;
  spec.vpp = v;
  spec.microbatches = m;
  auto s = BuildSchedule(name, spec);  // generate + comm pass + validate
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), s.status().ToString().c_str());
    std::exit(1);
  }
  auto sim = Simulate(*s, spec.costs);
  return sim.ok() ? sim->bubble_rate : -1;
}

}  // namespace

int main() {
  using pipecoord::bench::BestOf;
  using pipecoord::bench::Report;
  bool ok = true;
  struct Case {
    const char* name;
    int p, v, m;
  };
  for (Case c : {Case{"interleaved", 64, 2, 1024}, Case{"zbh1", 128, 1, 1024}}) {
    double bubble = 0;
    const double t = BestOf(3, [&] { bubble = Pipeline(c.name, c.p, c.v, c.m); });
    const double base = BestOf(3, [&] { Pipeline("1f1b", c.p, 1, c.m); });
    char label[96], baseline[64];
    std::snprintf(label, sizeof label, "%s p=%d v=%d m=%d (bubble %.4f)", c.name, c.p, c.v, c.m, bubble);
    std::snprintf(baseline, sizeof baseline, "1f1b p=%d m=%d", c.p, c.m);
    ok &= Report(label, t, 0.2, baseline, base);
  }
  return ok ? 0 : 1;
}
