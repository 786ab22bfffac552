// Schedule "auto" at fleet size (issue "one coordinator for 16,384 ranks": "schedule auto for
// 16,384 free workers and a 405B-class model answers within seconds"): jobplan::PlanAuto, the
// search SubmitJob runs, for a 405B-class model (Llama 3 405B's shape: 126 layers, h 16384, ffn
// 53248, 128 heads, vocabulary 128256, s 8192, global batch 2048) on N free CUDA workers of
// 80 GiB, 8 per host. The baseline, in the same run: the same search on 1,024 workers (the
// ratio says how the time grows with the fleet). Then what the coordinator does for a dry run and
// the submission after it: the same search twice on N workers sharing one schedule-shape cache
// (the coordinator keeps it across submissions), the second timed against the first. Not a test:
//   bazel run //bench:auto_plan_bench [-- --workers=16384]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/model_405b.h"
#include "jobplan/auto_plan.h"
#include "jobplan/spec_validation.h"

namespace {

using namespace pipecoord;

int Flag(int argc, char** argv, const char* name, int fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return std::atoi(argv[i] + prefix.size());
  }
  return fallback;
}

const char* g_device = "cuda";
const char* Device() { return g_device; }

v1::JobSpec Spec405B() {
  v1::JobSpec s = bench::Auto405BSpec();
  s.set_device(Device());
  return s;
}

// Seconds PlanAuto took on `workers`, printing what it chose; `shapes`: a cache kept across calls.
double Time(int workers, planner::ScheduleCache* shapes = nullptr, const char* label = "") {
  jobplan::FreeWorkers free;
  free.count = workers;
  free.memory_bytes = uint64_t{80} << 30;
  free.device_kind = Device();
  free.largest_host = 8;
  const v1::JobSpec spec = Spec405B();
  if (Status st = jobplan::ValidateJobSpec(spec); !st.ok()) {
    std::fprintf(stderr, "spec refused: %s\n", st.ToString().c_str());
    std::exit(1);
  }
  const auto t0 = std::chrono::steady_clock::now();
  jobplan::AutoPlanOptions options;
  options.shapes = shapes;
  auto r = jobplan::PlanAuto(spec, free, options);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r.ok()) {
    std::printf("%6d free workers: %.2f s, %s\n", workers, s, r.status().ToString().c_str());
  } else {
    std::printf("%6d free workers%s: %.2f s: %s on %d workers (dp %d x tp %d x pp %d)\n", workers, label, s,
                jobplan::DescribeStrategy(r->report.chosen()).c_str(), r->spec.dp() * r->spec.pp() * std::max(1, r->spec.tp()),
                r->spec.dp(), std::max(1, r->spec.tp()), r->spec.pp());
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const int workers = Flag(argc, argv, "workers", 16384);
  if (Flag(argc, argv, "cpu", 0) != 0) g_device = "cpu";
  const double base = Time(1024);
  const double big = Time(workers);
  std::printf("schedule auto, 405B-class model: %.2f s on %d free workers, %.2f s on 1,024 (baseline): ratio %.2f\n", big,
              workers, base, big / base);
  planner::ScheduleCache shapes;
  const double dry = Time(workers, &shapes, " (dry run, cold cache)");
  const double submit = Time(workers, &shapes, " (submission after it)");
  std::printf("schedule auto on %d free workers, the submission after a dry run: %.2f s against the dry run's %.2f s "
              "(baseline): ratio %.3f (%zu shapes kept)\n",
              workers, submit, dry, submit / dry, shapes.size());
  return 0;
}
