// The memory-aware search (schedules/memory_search.h) against the published schedulers of Qi et
// al. (sail-sg/zero-bubble-pipeline-parallelism, re-timed by this simulator), and its time.
//   bazel run -c opt //bench:schedule_search_bench
// 1. Issue 16's table: each case's longest rank span (what the paper tabulates) next to the
//    published figure, and whether ours is at most that.
// 2. Span against the memory limit for one setting (p 8, m 24, f = b = w = 1), both placements.
// 3. Search time (generate, communication pass, validate) for zb-auto and v-auto at p 32 m 256
//    (target < 1 s) and p 64 m 512 (< 5 s), at 1F1B's memory and at half of it, against zbh1's
//    generation of the same shape (the named baseline). Exit status 1 if a time target is missed.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/bench_util.h"
#include "schedules/comm_pass.h"
#include "schedules/memory_search.h"
#include "schedules/registry.h"
#include "schedules/simulator.h"
#include "schedules/validator.h"

namespace {

using namespace pipecoord::schedules;

template <typename T>
T Must(pipecoord::Result<T> r, const std::string& what) {
  if (!r.ok()) {
    std::fprintf(stderr, "%s: %s\n", what.c_str(), r.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

struct Setting {
  int p, m;
  double f, b, w, comm, w_share;
};

ScheduleSpec SpecOf(const Setting& s, double limit) {
  ScheduleSpec spec;
  spec.pp = s.p;
  spec.microbatches = s.m;
  spec.costs.f = s.f;
  spec.costs.b = s.b;
  spec.costs.w = s.w;
  spec.costs.comm = s.comm;
  spec.costs.w_share = s.w_share;
  spec.mem_limit = limit;
  return spec;
}

double LongestSpan(const Simulation& sim) {
  double span = 0;
  for (const RankStats& r : sim.ranks) span = std::max(span, r.last_end - r.first_start);
  return span;
}

// v-auto through its search (whether or not the registry lists it), everything else by name.
Schedule Generate(const std::string& name, const ScheduleSpec& spec) {
  if (name == "v-auto") return Must(SearchVAuto(spec), name).schedule;
  return Must(GenerateComputeOrder(name, spec), name);
}

double Span(const std::string& name, const Setting& s, double limit) {
  const ScheduleSpec spec = SpecOf(s, limit);
  return LongestSpan(Must(Simulate(Generate(name, spec), spec.costs), "simulate " + name));
}

struct Row {
  const char* what;
  const char* name;
  Setting setting;
  double limit;
  double published;
};

}  // namespace

int main() {
  using pipecoord::bench::BestOf;
  using pipecoord::bench::Report;
  const Setting unit8 = {8, 24, 1, 1, 1, 0, 0.5};
  const Setting uneven16 = {16, 64, 1, 1.2, 0.8, 0, 0.5};
  const Setting unit16 = {16, 64, 1, 1, 1, 0, 0.5};
  const Setting paper = {8, 24, 18522, 18086, 9337, 601, 0.3664};

  std::printf("1. Longest rank span against the published schedulers (comm 0 unless given)\n");
  const Row rows[] = {
      {"zb-auto p8 m24 f=b=w=1 limit 10", "zb-auto", unit8, 10, 77},
      {"zb-auto p8 m24 f=b=w=1 limit 12", "zb-auto", unit8, 12, 75},
      {"zb-auto p8 m24 f=b=w=1 limit 14", "zb-auto", unit8, 14, 73},
      {"zb-auto p8 m24 f=b=w=1 limit 16", "zb-auto", unit8, 16, 72},
      {"v-auto p8 m24 f=b=w=1 limit 4", "v-auto", unit8, 4, 83.5},
      {"v-auto p8 m24 f=b=w=1 limit 6", "v-auto", unit8, 6, 77.5},
      {"v-auto p8 m24 f=b=w=1 limit 8", "v-auto", unit8, 8, 72},
      {"v-half p16 m64 f1 b1.2 w0.8", "v-half", uneven16, 0, 218.8},
      {"zbv p16 m64 f1 b1.2 w0.8", "zbv", uneven16, 0, 197.8},
      {"paper setting: zb-auto limit 16", "zb-auto", paper, 16, 1152599},
      {"paper setting: zbv", "zbv", paper, 0, 1186022.5},
      {"paper setting: v-half", "v-half", paper, 0, 1328771.5},
      {"dualpipev p16 m64 f=b=w=1", "dualpipev", unit16, 0, 207},
      {"paper setting: dualpipev", "dualpipev", paper, 0, 1295409.5},
      {"zb-auto p8 m24 f=b=w=1 limit 4", "zb-auto", unit8, 4, 247},
  };
  int met = 0;
  for (const Row& row : rows) {
    const double span = Span(row.name, row.setting, row.limit);
    const bool ok = span <= row.published * (1 + 1e-12);
    met += ok;
    std::printf("  %-34s %12.10g  published %12.10g  %s (%+.3f%%)\n", row.what, span, row.published,
                ok ? "met   " : "missed", 100.0 * (span / row.published - 1));
  }
  std::printf("  %d of %zu at most the published figure\n", met, std::size(rows));

  std::printf("\n2. Span against the memory limit, p 8, m 24, f = b = w = 1 (m t = 72)\n");
  std::printf("  %-6s %10s %10s\n", "limit", "zb-auto", "v-auto");
  for (double limit : {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 14.0, 16.0}) {
    std::printf("  %-6g %10g %10g\n", limit, Span("zb-auto", unit8, limit), Span("v-auto", unit8, limit));
  }

  std::printf("\n3. Search time: generate + communication pass + validate\n");
  bool ok = true;
  for (auto [p, m, target] : {std::tuple{32, 256, 1.0}, std::tuple{64, 512, 5.0}}) {
    const Setting s = {p, m, 1, 1.2, 0.8, 0, 0.5};
    const double t_zbh1 = BestOf(3, [&] { Must(BuildSchedule("zbh1", SpecOf(s, 0)), "zbh1"); });
    char baseline[64];
    std::snprintf(baseline, sizeof baseline, "zbh1 p=%d m=%d", p, m);
    for (const char* name : {"zb-auto", "v-auto"}) {
      for (double share : {1.0, 0.5}) {
        const ScheduleSpec spec = SpecOf(s, share * p);
        SearchResult found;
        const double t = BestOf(1, [&] {
          found = Must(std::string(name) == "v-auto" ? SearchVAuto(spec) : SearchZbAuto(spec), name);
          const Schedule full = Must(AddCommunication(found.schedule, spec.costs), "comm pass");
          const pipecoord::Status valid = Validate(full);
          if (!valid.ok()) {
            std::fprintf(stderr, "%s: %s\n", name, valid.ToString().c_str());
            std::exit(1);
          }
        });
        char label[96];
        std::snprintf(label, sizeof label, "%s p=%d m=%d mem-limit=%g", name, p, m, share * p);
        ok &= Report(label, t, target, baseline, t_zbh1);
        std::printf("    span %.6g (%s %s), %d candidates, winner: %.60s\n", found.span, found.baseline.c_str(),
                    found.baseline_span < 0 ? "does not fit" : std::to_string(found.baseline_span).c_str(),
                    found.candidates, found.winner.c_str());
      }
    }
  }
  return ok ? 0 : 1;
}
