// zb-auto's search time and what it finds, and the zbh1 pipeline at scale.
//   bazel run -c opt //bench:zb_auto_bench
// 1. zb-auto p=16 m=64 f=1 b=1.2 w=0.8 at mem-limit 16 (1F1B's memory): generate + comm pass +
//    validate, against zbh1 of the same shape (baseline), with both makespans; then the same at
//    larger limits, where the search has room to beat zbh1.
// 2. zbh1 p=128 m=1024: generate + AddCommunication + Validate + Simulate, against 1f1b.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/bench_util.h"
#include "schedules/comm_pass.h"
#include "schedules/registry.h"
#include "schedules/simulator.h"
#include "schedules/validator.h"
#include "schedules/memory_search.h"

namespace {

using namespace pipecoord::schedules;

template <typename T>
T Must(pipecoord::Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, r.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

ScheduleSpec Spec(int p, int m, double limit) {
  ScheduleSpec spec;
  spec.pp = p;
  spec.microbatches = m;
  spec.costs.f = 1;
  spec.costs.b = 1.2;
  spec.costs.w = 0.8;
  spec.mem_limit = limit;
  return spec;
}

double Makespan(const Schedule& s, const CostModel& c) { return Must(Simulate(s, c), "simulate").makespan; }

// Every step a plan goes through, one after the other.
double FullPipeline(const char* name, const ScheduleSpec& spec) {
  Schedule compute = Must(GenerateComputeOrder(name, spec), name);
  Schedule full = Must(AddCommunication(compute, spec.costs), "comm pass");
  pipecoord::Status st = Validate(full);
  if (!st.ok()) {
    std::fprintf(stderr, "%s: %s\n", name, st.ToString().c_str());
    std::exit(1);
  }
  return Makespan(full, spec.costs);
}

}  // namespace

int main() {
  using pipecoord::bench::BestOf;
  using pipecoord::bench::Report;
  bool ok = true;

  const int p = 16, m = 64;
  for (double limit : {16.0, 24.0, 31.0}) {
    const ScheduleSpec spec = Spec(p, m, limit);
    Schedule autos, zbh1;
    const double t_auto = BestOf(3, [&] { autos = Must(BuildSchedule("zb-auto", spec), "zb-auto"); });
    const double t_zbh1 = BestOf(3, [&] { zbh1 = Must(BuildSchedule("zbh1", spec), "zbh1"); });
    const SearchResult found = Must(SearchZbAuto(spec), "zb-auto search");
    char label[96], baseline[64];
    std::snprintf(label, sizeof label, "zb-auto p=%d m=%d mem-limit=%g", p, m, limit);
    std::snprintf(baseline, sizeof baseline, "zbh1 p=%d m=%d", p, m);
    ok &= Report(label, t_auto, 1.0, baseline, t_zbh1);
    const double mk_auto = Makespan(autos, spec.costs), mk_zbh1 = Makespan(zbh1, spec.costs);
    // No schedule beats (p-1) f + m t: the last rank starts after p-1 forwards and has m t of
    // work. At 1F1B's memory rank 0 also waits (p-1) b for its first B: m t + (p-1) b.
    std::printf("  makespan %.4g (zbh1 %.4g: %.2f%% shorter; lower bound %.4g), %d candidates, "
                "winner: %s\n",
                mk_auto, mk_zbh1, 100.0 * (1 - mk_auto / mk_zbh1),
                m * 3.0 + (p - 1) * (limit <= p ? 1.2 : 1.0), found.candidates, found.winner.c_str());
  }

  const ScheduleSpec big = Spec(128, 1024, 0);
  double mk = 0;
  const double t_zbh1 = BestOf(3, [&] { mk = FullPipeline("zbh1", big); });
  const double t_1f1b = BestOf(3, [&] { FullPipeline("1f1b", big); });
  char label[96];
  std::snprintf(label, sizeof label, "zbh1 p=128 m=1024 gen+comm+validate+sim");
  ok &= Report(label, t_zbh1, 0.2, "1f1b p=128 m=1024", t_1f1b);
  std::printf("  makespan %.6g (m t + (p-1)(f+b-w) = %.6g)\n", mk, 1024 * 3.0 + 127 * 1.4);
  return ok ? 0 : 1;
}
