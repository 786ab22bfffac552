// Tensor parallelism on the CPU backend, in one run (issue 26's benchmark): the same job
// (bench/cpu_bench_job.h: pp 2, 8 micro-batches of 4, h 128, 4 layers) at tp 1 (the baseline),
// 2 and 4, each rank a real rank run over TCP on loopback (RunLocally). Per tp it prints the mean
// step time and its ratio to tp 1's, the share of compute time spent inside tensor-parallel
// collectives, the bytes those sent per step against Megatron's closed form, and each pipeline
// rank's measured peak against the plan's budget (memory/'s pipecoord-cpu recipe).
//
// On this 2-core machine tp 2 x pp 2 runs 4 ranks and tp 4 x pp 2 runs 8 ranks on 2 cores, so the
// step times measure the overhead of splitting, not a speed-up (which needs a core per rank).
// The planner's step-time model (planner/step_time.h) prices GPUs and links, not this CPU, so no
// time prediction is compared here; calibration (jobplan/calibration.h) is the CPU's predictor.
//   bazel run -c opt //bench:tensor_parallel_bench
#include <algorithm>
#include <cstdio>
#include <map>

#include "bench/cpu_bench_job.h"
#include "jobplan/layout.h"
#include "proto/op_kinds.h"
#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "worker/daemon/local_run.h"

namespace {

using namespace pipecoord;

struct TpResult {
  double step_s = 0;
  double tp_share = 0;        // tp collective time / compute time
  double bytes_per_step = 0;  // per rank, mean over ranks
  std::vector<uint64_t> peak, budget;  // by pipeline rank (the worst over its tp and dp ranks)
};

TpResult Run(int tp) {
  v1::JobSpec spec = bench::CpuBenchJob("1f1b", 5);
  spec.set_tp(tp);
  if (auto st = jobplan::ValidateJobSpec(spec); !st.ok()) {
    std::fprintf(stderr, "tp %d: %s\n", tp, st.ToString().c_str());
    std::exit(1);
  }
  const v1::JobSpec full = jobplan::WithDefaults(spec);
  auto plan = jobplan::PlanJob(full);
  auto run = worker::RunLocally(spec);
  if (!plan.ok() || !run.ok()) {
    std::fprintf(stderr, "tp %d: %s\n", tp, (plan.ok() ? run.status() : plan.status()).ToString().c_str());
    std::exit(1);
  }
  const RankLayout layout = jobplan::LayoutOf(full);
  TpResult r;
  r.peak.assign(layout.pp(), 0);
  for (int p = 0; p < layout.pp(); ++p) r.budget.push_back(plan->memory_budget_bytes(p));
  std::map<int, std::pair<int64_t, int64_t>> span;
  double tp_ns = 0, compute_ns = 0, bytes = 0;
  int steps = 0;
  for (int g = 0; g < layout.world(); ++g) {
    for (const auto& rep : run->reports[g]) {
      r.peak[layout.PipelineRank(g)] = std::max(r.peak[layout.PipelineRank(g)], rep.summary.memory_peak_bytes());
      if (rep.summary.step() == 0) continue;  // warm-up
      ++steps;
      for (const auto& t : rep.actions) {
        auto [it, fresh] = span.try_emplace(t.step(), t.start_ns(), t.end_ns());
        if (!fresh) {
          it->second.first = std::min(it->second.first, t.start_ns());
          it->second.second = std::max(it->second.second, t.end_ns());
        }
        if (v1::IsCompute(t.action().op())) compute_ns += t.end_ns() - t.start_ns();
        tp_ns += t.tp_comm_ns();
        bytes += t.tp_comm_bytes();
      }
    }
  }
  for (const auto& [step, s] : span) r.step_s += (s.second - s.first) * 1e-9;
  r.step_s /= span.size();
  r.tp_share = compute_ns > 0 ? tp_ns / compute_ns : 0;
  r.bytes_per_step = steps ? bytes / steps : 0;
  return r;
}

}  // namespace

int main() {
  const v1::JobSpec job = bench::CpuBenchJob("1f1b", 5);
  const int m = job.microbatches(), n = job.micro_batch_size() * job.model().seq_len(), h = job.model().hidden();
  const TpResult base = Run(1);
  std::printf("tensor-parallel bench: 1f1b, pp 2, m %d, b %d, s %d, h %d, 4 layers (2 a rank), 4 steps after warm-up\n",
              m, job.micro_batch_size(), job.model().seq_len(), h);
  std::printf("%-4s %12s %10s %12s %22s %22s  %s\n", "tp", "step (s)", "vs tp 1", "tp comm", "bytes/rank/step",
              "closed form", "peak / budget per pipeline rank (MiB)");
  for (int tp : {1, 2, 4}) {
    const TpResult r = tp == 1 ? base : Run(tp);
    // Per rank and step, F + BW of every micro-batch: each block 4 all-reduces of n x h floats,
    // the first stage's embedding 1, the last stage's head 1 (its input gradient) plus the maxima
    // gathered (n) and S, z summed (2n). Ranks of the two pipeline stages averaged.
    const double ar = 2.0 * (tp - 1) / tp * n * h * 4;
    const int layers = job.model().layers() / job.pp();  // blocks a pipeline rank holds
    const double first = m * (4 * layers * ar + ar),
                 last = m * (4 * layers * ar + ar + (tp - 1) * n * 4.0 + 2.0 * (tp - 1) / tp * 2 * n * 4);
    const double closed = tp == 1 ? 0 : (first + last) / 2;
    std::printf("%-4d %12.4f %9.2fx %11.1f%% %22.0f %15.0f (%s) ", tp, r.step_s, r.step_s / base.step_s,
                100 * r.tp_share, r.bytes_per_step, closed, r.bytes_per_step == closed ? "equal" : "DIFFERENT");
    for (size_t p = 0; p < r.peak.size(); ++p) {
      std::printf(" r%zu %.2f/%.2f (%s)", p, r.peak[p] / 1048576.0, r.budget[p] / 1048576.0,
                  r.peak[p] == r.budget[p] ? "equal" : "DIFFERENT");
    }
    std::printf("\n");
  }
  return 0;
}
