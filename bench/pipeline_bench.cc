// The CPU backend end to end (issue 5's speed targets), all in one run:
//  1. measured step time vs the simulator's prediction fed with the measured per-action costs
//     (target: within 15%), for 1f1b and zbh1 on the same job;
//  2. zbh1 against 1f1b (baseline) on the same job: zbh1 must be measurably faster;
//  3. telemetry (building and serialising each step's batch, as the daemon does) as a share of
//     the step time (target: under 2%).
// Two ranks on this 2-core machine, one core each.
//   bazel run //bench:pipeline_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "bench/cpu_bench_job.h"
#include "proto/telemetry.pb.h"
#include "schedules/registry.h"
#include "schedules/simulator.h"
#include "worker/daemon/local_run.h"

namespace {

using namespace pipecoord;

struct Measured {
  double step_s = 0;         // mean measured step time (first step excluded: warm-up)
  double predicted_s = 0;    // simulator makespan with measured costs + measured OPT
  double telemetry_s = 0;    // mean per step per rank: building + serialising the batch
};

Measured Run(const std::string& schedule) {
  const v1::JobSpec spec = bench::CpuBenchJob(schedule, 4);
  double telemetry = 0;
  int batches = 0;
  auto run = worker::RunLocally(spec, [&](int global, const worker::StepReport& r) {
    // What the daemon does with each report, timed.
    const auto t0 = std::chrono::steady_clock::now();
    v1::TelemetryBatch batch;
    batch.set_worker_id("worker-0001");
    batch.set_job_id("job-000001");
    batch.set_rank(global);
    for (const auto& t : r.actions) *batch.add_actions() = t;
    *batch.add_steps() = r.summary;
    std::string wire = batch.SerializeAsString();
    telemetry += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    batches += wire.empty() ? 0 : 1;
  });
  if (!run.ok()) {
    std::fprintf(stderr, "%s: %s\n", schedule.c_str(), run.status().ToString().c_str());
    std::exit(1);
  }
  // Per-op mean durations over steps 1.. on every rank, and per-step spans.
  std::map<int, std::pair<double, int>> op_time;  // op -> (sum s, count)
  std::map<int, std::pair<int64_t, int64_t>> span;
  for (const auto& rank : run->reports) {
    for (const auto& rep : rank) {
      if (rep.summary.step() == 0) continue;
      for (const auto& t : rep.actions) {
        auto& o = op_time[t.action().op()];
        o.first += (t.end_ns() - t.start_ns()) * 1e-9;
        o.second += 1;
        auto [it, fresh] = span.try_emplace(t.step(), t.start_ns(), t.end_ns());
        if (!fresh) {
          it->second.first = std::min(it->second.first, t.start_ns());
          it->second.second = std::max(it->second.second, t.end_ns());
        }
      }
    }
  }
  auto mean = [&](v1::Op op) { auto& o = op_time[op]; return o.second ? o.first / o.second : 0.0; };
  Measured m;
  for (const auto& [step, s] : span) m.step_s += (s.second - s.first) * 1e-9;
  m.step_s /= span.size();
  m.telemetry_s = telemetry / batches;
  schedules::ScheduleSpec ss;
  ss.pp = spec.pp();
  ss.microbatches = spec.microbatches();
  ss.costs.f = mean(v1::F);
  if (schedule == "1f1b") {
    ss.costs.b = mean(v1::BW) / 2;  // only b + w matters for a fused backward
    ss.costs.w = mean(v1::BW) / 2;
  } else {
    ss.costs.b = mean(v1::B);
    ss.costs.w = mean(v1::W);
  }
  auto s = schedules::BuildSchedule(schedule, ss);
  auto sim = schedules::Simulate(*s, ss.costs);
  m.predicted_s = sim->makespan + mean(v1::OPT);
  std::printf("%-5s measured step %.4f s, predicted %.4f s (f %.4f b %.4f w %.4f opt %.4f s): "
              "measured/predicted %.3f (target within 15%%: %s)\n",
              schedule.c_str(), m.step_s, m.predicted_s, ss.costs.f, ss.costs.b, ss.costs.w, mean(v1::OPT),
              m.step_s / m.predicted_s, std::abs(m.step_s / m.predicted_s - 1) <= 0.15 ? "ok" : "MISSED");
  return m;
}

}  // namespace

int main() {
  const Measured base = Run("1f1b");
  const Measured zb = Run("zbh1");
  std::printf("zbh1 step %.4f s vs baseline 1f1b %.4f s: ratio %.3f (%s)\n", zb.step_s, base.step_s,
              zb.step_s / base.step_s, zb.step_s < base.step_s ? "zbh1 faster" : "NOT faster");
  const double share = zb.telemetry_s / zb.step_s;
  std::printf("telemetry per rank per step %.6f s = %.3f%% of the step (target < 2%%: %s)\n", zb.telemetry_s,
              100 * share, share < 0.02 ? "ok" : "MISSED");
  return 0;
}
