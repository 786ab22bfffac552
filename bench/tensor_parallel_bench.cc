// Tensor parallelism and ZeRO on the CPU backend, in one run (issue 26's benchmark): the same
// job (bench/cpu_bench_job.h: pp 2, 8 micro-batches of 4, h 128, 4 layers) on dp 2, at tp 1, 2
// and 4, each with zero 0, 1 and 2; tp 1 zero 0 is the baseline. Each rank is a real rank run over
// TCP on loopback (RunLocally). Per strategy it prints the mean step time and its ratio to the
// baseline's, the share of compute time spent inside tensor-parallel collectives, the bytes
// those sent per rank and step against Megatron's closed form, the bytes the data-parallel
// reduction (an all-reduce, or ZeRO's reduce-scatter and all-gather) sent against the ring's
// (dp 2: each rank sends each of its L parameters' 4 bytes once, 4 L), and each pipeline rank's
// measured peak against the plan's budget (memory/'s pipecoord-cpu recipe, the planner's
// prediction) and against zero 0's peak at the same tp.
//
// A second table, at tp 2 zero 1, runs sequence parallelism off and on with each activation
// recompute mode: step time against neither, the share of compute time spent rebuilding, and the
// peaks against neither's.
//
// On this 2-core machine tp 2 x pp 2 x dp 2 runs 8 ranks and tp 4 16 ranks on 2 cores, so the
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

struct Measured {
  double step_s = 0;
  double recompute_share = 0;    // recompute time / compute time
  double tp_share = 0;           // tp collective time / compute time
  double tp_bytes = 0;           // per rank and step, mean over ranks
  double dp_bytes = 0, dp_closed = 0;  // the same for the data-parallel part, and its closed form
  std::vector<uint64_t> peak, budget;  // by pipeline rank (the worst over its tp and dp ranks)
};

v1::JobSpec Job(int tp, int zero, bool sp = false, const std::string& recompute = "") {
  v1::JobSpec spec = bench::CpuBenchJob("1f1b", 5);
  spec.set_dp(2);
  spec.set_tp(tp);
  spec.set_zero(zero);
  spec.set_sequence_parallel(sp);
  if (!recompute.empty()) spec.set_recompute(recompute);
  return spec;
}

Measured Run(int tp, int zero, bool sp = false, const std::string& recompute = "") {
  const v1::JobSpec spec = Job(tp, zero, sp, recompute);
  if (auto st = jobplan::ValidateJobSpec(spec); !st.ok()) {
    std::fprintf(stderr, "tp %d zero %d: %s\n", tp, zero, st.ToString().c_str());
    std::exit(1);
  }
  const v1::JobSpec full = jobplan::WithDefaults(spec);
  auto plan = jobplan::PlanJob(full);
  auto run = worker::RunLocally(spec, {}, {}, /*keep_final_state=*/true);
  if (!plan.ok() || !run.ok()) {
    std::fprintf(stderr, "tp %d zero %d: %s\n", tp, zero, (plan.ok() ? run.status() : plan.status()).ToString().c_str());
    std::exit(1);
  }
  const RankLayout layout = jobplan::LayoutOf(full);
  Measured r;
  r.peak.assign(layout.pp(), 0);
  for (int p = 0; p < layout.pp(); ++p) r.budget.push_back(plan->memory_budget_bytes(p));
  std::map<int, std::pair<int64_t, int64_t>> span;
  double tp_ns = 0, compute_ns = 0, tp_bytes = 0, dp_bytes = 0, params = 0, recompute_ns = 0;
  int steps = 0;
  for (int g = 0; g < layout.world(); ++g) {
    for (const auto& [name, values] : run->final_state[g]) {
      if (name.ends_with("/value")) params += values.size();
    }
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
        recompute_ns += t.recompute_ns();
        tp_bytes += t.tp_comm_bytes();
        dp_bytes += t.dp_comm_bytes();
      }
    }
  }
  for (const auto& [step, s] : span) r.step_s += (s.second - s.first) * 1e-9;
  r.step_s /= span.size();
  r.tp_share = compute_ns > 0 ? tp_ns / compute_ns : 0;
  r.recompute_share = compute_ns > 0 ? recompute_ns / compute_ns : 0;
  r.tp_bytes = steps ? tp_bytes / steps : 0;
  r.dp_bytes = steps ? dp_bytes / steps : 0;
  r.dp_closed = 4 * params / layout.world();  // dp 2: 4 L per rank, L its parameters (mean over ranks)
  return r;
}

const char* Same(double a, double b) { return a == b ? "equal" : "DIFFERENT"; }

}  // namespace

int main() {
  const v1::JobSpec job = Job(1, 0);
  const int m = job.microbatches(), n = job.micro_batch_size() * job.model().seq_len(), h = job.model().hidden();
  std::printf("tp x zero bench: 1f1b, pp 2, dp 2, m %d, b %d, s %d, h %d, 4 layers (2 a rank), 4 steps after warm-up; "
              "baseline tp 1 zero 0\n",
              m, job.micro_batch_size(), job.model().seq_len(), h);
  std::printf("%-3s %-5s %9s %9s %8s %24s %24s  %s\n", "tp", "zero", "step (s)", "vs base", "tp comm",
              "tp bytes/rank/step", "dp bytes/rank/step", "peak / budget per pipeline rank (MiB), peak vs zero 0");
  Measured base;
  for (int tp : {1, 2, 4}) {
    Measured zero0;
    for (int zero : {0, 1, 2}) {
      const Measured r = Run(tp, zero);
      if (tp == 1 && zero == 0) base = r;
      if (zero == 0) zero0 = r;
      // Per rank and step, F + BW of every micro-batch: each block 4 all-reduces of n x h floats,
      // the first stage's embedding 1, the last stage's head 1 (its input gradient) plus the
      // maxima gathered (n) and S, z summed (2n). Ranks of the two pipeline stages averaged.
      const double ar = 2.0 * (tp - 1) / tp * n * h * 4;
      const int layers = job.model().layers() / job.pp();  // blocks a pipeline rank holds
      const double first = m * (4 * layers * ar + ar),
                   last = m * (4 * layers * ar + ar + (tp - 1) * n * 4.0 + 2.0 * (tp - 1) / tp * 2 * n * 4);
      const double closed = tp == 1 ? 0 : (first + last) / 2;
      std::printf("%-3d %-5d %9.4f %8.2fx %7.1f%% %9.0f (%s) %9.0f (%s) ", tp, zero, r.step_s, r.step_s / base.step_s,
                  100 * r.tp_share, r.tp_bytes, Same(r.tp_bytes, closed), r.dp_bytes, Same(r.dp_bytes, r.dp_closed));
      for (size_t p = 0; p < r.peak.size(); ++p) {
        std::printf(" r%zu %.3f/%.3f (%s) %.3fx", p, r.peak[p] / 1048576.0, r.budget[p] / 1048576.0,
                    Same(r.peak[p], r.budget[p]), static_cast<double>(r.peak[p]) / zero0.peak[p]);
      }
      std::printf("\n");
    }
  }
  // Sequence parallelism and recompute at tp 2, zero 1: what each costs in step time (the share of
  // compute spent rebuilding) and saves in memory, against tp 2 zero 1 without either.
  const Measured plain = Run(2, 1);
  std::printf("\ntp 2, zero 1: sequence parallelism and activation recompute; baseline: neither (%.4f s)\n", plain.step_s);
  std::printf("%-4s %-10s %9s %9s %10s %9s  %s\n", "sp", "recompute", "step (s)", "vs base", "recompute", "tp comm",
              "peak / budget per pipeline rank (MiB), peak vs baseline");
  for (bool sp : {false, true}) {
    for (const char* recompute : {"none", "selective", "full"}) {
      const Measured r = Run(2, 1, sp, recompute);
      std::printf("%-4s %-10s %9.4f %8.2fx %9.1f%% %8.1f%% ", sp ? "on" : "off", recompute, r.step_s, r.step_s / plain.step_s,
                  100 * r.recompute_share, 100 * r.tp_share);
      for (size_t p = 0; p < r.peak.size(); ++p) {
        std::printf(" r%zu %.3f/%.3f (%s) %.3fx", p, r.peak[p] / 1048576.0, r.budget[p] / 1048576.0,
                    Same(r.peak[p], r.budget[p]), static_cast<double>(r.peak[p]) / plain.peak[p]);
      }
      std::printf("\n");
    }
  }
  return 0;
}
