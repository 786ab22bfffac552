// pipectl plan: search parallel strategies for a model on a cluster and print the fastest
// that fit in memory, with the reasons the others were pruned.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/cli_io.h"
#include "cli/model_flags.h"
#include "cli/verbs.h"
#include "common/flags.h"
#include "memory/units.h"
#include "planner/plan_report.h"
#include "planner/planner.h"

namespace pipecoord::cli {
namespace {

constexpr const char* kVerb = "plan";

struct Options {
  ModelFlags model;
  int gpus = 0, gpus_per_node = 8, global_batch = 0, top = 10, max_tp = 64;
  double gpu_memory_gib = 0, reserve_gib = 0, intra_gbps = 200, inter_gbps = 25, peak_tflops = 989,
         efficiency = 0.5, latency_us = 10, hbm_gbps = 3000;
  std::string schedules, recompute = "none,selective,full", dtype = "bf16", optimizer = "adamw",
              recipe = "megatron", format = "text", out;
  std::vector<int> micro_batches = {1, 2, 4, 8, 16}, zero = {0, 1, 2, 3}, vpps = {2, 3, 4, 5, 6, 8};
  bool sequence_parallel = true, no_cache = false, progress = true;
};

void Declare(FlagSet& f, Options& o) {
  DeclareModelFlags(f, &o.model);
  f.Int("gpus", &o.gpus, "GPUs in the job, required; every plan uses all: dp x tp x pp = gpus");
  f.Double("gpu-memory-gib", &o.gpu_memory_gib, "memory per GPU in GiB (2^30 bytes), required (H100: 80)");
  f.Double("reserve-gib", &o.reserve_gib, "GiB per GPU kept out of the budget for the CUDA context, NCCL "
                                          "buffers and fragmentation; default 0");
  f.Int("global-batch", &o.global_batch, "samples per step; default: the smallest multiple of --gpus that "
                                         "reaches 4M tokens");
  f.Int("top", &o.top, "how many strategies to print; default 10");
  f.Int("gpus-per-node", &o.gpus_per_node, "GPUs per node (NVLink domain); default 8");
  f.Double("intra-node-gbps", &o.intra_gbps, "GB/s one GPU moves in a collective inside a node; default 200");
  f.Double("inter-node-gbps", &o.inter_gbps, "GB/s one GPU moves across nodes; default 25 (200 Gb/s)");
  f.Double("latency-us", &o.latency_us, "microseconds per transfer or collective step; default 10");
  f.Double("peak-tflops", &o.peak_tflops, "dense 16-bit TFLOP/s per GPU; default 989 (H100 SXM)");
  f.Double("efficiency", &o.efficiency, "share of the peak the matmuls reach, (0, 1]; default 0.5");
  f.Double("hbm-gbps", &o.hbm_gbps, "GB/s of GPU memory, for the optimizer step; default 3000");
  f.String("schedules", &o.schedules, "comma-separated schedules to try; default all (pipectl schedules)");
  f.IntList("micro-batches", &o.micro_batches, "micro-batch sizes to try; default 1,2,4,8,16");
  f.IntList("zero", &o.zero, "ZeRO stages to try; default 0,1,2,3");
  f.String("recompute", &o.recompute, "recompute policies to try; default none,selective,full");
  f.IntList("vpps", &o.vpps, "chunks per rank to try for interleaved and looped-bfs; default 2,3,4,5,6,8");
  f.Int("max-tp", &o.max_tp, "largest tensor-parallel degree to try; default 64");
  f.Bool("sequence-parallel", &o.sequence_parallel, "also try sequence parallelism with tp > 1; default true");
  f.String("dtype", &o.dtype, "fp32, bf16 or fp16; default bf16");
  f.String("optimizer", &o.optimizer, "adamw or sgd; default adamw");
  f.String("recipe", &o.recipe, "activation recipe: megatron or eager; default megatron");
  f.Bool("no-cache", &o.no_cache, "simulate the schedule for every candidate (slow; for comparison)");
  f.Bool("progress", &o.progress, "draw a progress bar on stderr when it is a terminal; default true");
  f.Format(&o.format, {"text", "json"}, "text or json; default text");
  f.String("out", &o.out, "write the output to this file instead of stdout");
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) parts.push_back(item);
  return parts;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Status Build(const FlagSet& f, const Options& o, const memory::ModelSpec& m, planner::ClusterSpec* c,
             planner::SearchSpace* s) {
  if (!f.Given("gpus")) return InvalidArgument("--gpus: required (GPUs in the job)");
  if (!f.Given("gpu-memory-gib")) return InvalidArgument("--gpu-memory-gib: required (memory per GPU, GiB)");
  if (o.gpus < 1 || o.gpus > (1 << 20)) return InvalidArgument("--gpus: must be in [1, 1048576], got " + std::to_string(o.gpus));
  if (!(o.gpu_memory_gib > 0 && o.gpu_memory_gib < 1e6)) {
    return InvalidArgument("--gpu-memory-gib: must be in (0, 1e6), got " + Num(o.gpu_memory_gib));
  }
  if (!(o.reserve_gib >= 0 && o.reserve_gib < o.gpu_memory_gib)) {
    return InvalidArgument("--reserve-gib: must be >= 0 and below --gpu-memory-gib (" + Num(o.gpu_memory_gib) + "), got " +
                           Num(o.reserve_gib));
  }
  if (o.top < 1 || o.top > 10000) return InvalidArgument("--top: must be in [1, 10000], got " + std::to_string(o.top));
  // The cluster's numbers in the flags' own units (ValidateCluster sees bytes/s and FLOP/s).
  for (auto [flag, v] : {std::pair{"intra-node-gbps", o.intra_gbps}, {"inter-node-gbps", o.inter_gbps},
                         {"peak-tflops", o.peak_tflops}, {"hbm-gbps", o.hbm_gbps}}) {
    if (!(v > 0 && v < 1e9)) return InvalidArgument(std::string("--") + flag + ": must be in (0, 1e9), got " + Num(v));
  }
  if (!(o.latency_us >= 0 && o.latency_us < 1e9)) return InvalidArgument("--latency-us: must be in [0, 1e9), got " + Num(o.latency_us));
  if (!(o.efficiency > 0 && o.efficiency <= 1)) return InvalidArgument("--efficiency: must be in (0, 1], got " + Num(o.efficiency));
  c->gpus = o.gpus;
  c->gpu_memory_bytes = static_cast<int64_t>(std::llround(o.gpu_memory_gib * memory::kGiB));
  c->reserved_bytes = static_cast<int64_t>(std::llround(o.reserve_gib * memory::kGiB));
  c->gpus_per_node = o.gpus_per_node;
  c->intra_node_bandwidth = o.intra_gbps * 1e9;
  c->inter_node_bandwidth = o.inter_gbps * 1e9;
  c->link_latency_s = o.latency_us * 1e-6;
  c->peak_flops = o.peak_tflops * 1e12;
  c->efficiency = o.efficiency;
  c->memory_bandwidth = o.hbm_gbps * 1e9;
  Status cs = planner::ValidateCluster(*c);
  if (!cs.ok()) return InvalidArgument("--" + cs.message());

  if (f.Given("global-batch")) {
    s->global_batch = o.global_batch;
  } else {
    const int64_t want = (int64_t{4} << 20) / m.seq_len;
    const int64_t gb = std::max<int64_t>(1, (want + o.gpus - 1) / o.gpus) * o.gpus;
    s->global_batch = static_cast<int>(std::min<int64_t>(gb, 1 << 30));
  }
  s->micro_batches = o.micro_batches;
  s->zero_stages = o.zero;
  s->vpps = o.vpps;
  s->max_tp = o.max_tp;
  s->sequence_parallel = o.sequence_parallel;
  s->recipe = o.recipe;
  if (f.Given("schedules")) s->schedules = Split(o.schedules);
  s->recompute.clear();
  for (const std::string& r : Split(o.recompute)) {
    auto rc = memory::ParseRecompute(r);
    if (!rc.ok()) return InvalidArgument("--" + rc.status().message());
    s->recompute.push_back(*rc);
  }
  auto dt = memory::ParseDtypePolicy(o.dtype);
  if (!dt.ok()) return InvalidArgument("--" + dt.status().message());
  s->dtype = *dt;
  auto opt = memory::ParseOptimizer(o.optimizer);
  if (!opt.ok()) return InvalidArgument("--" + opt.status().message());
  s->optimizer = *opt;
  Status ss = planner::ValidateSearchSpace(*s);
  if (!ss.ok()) return InvalidArgument("--" + ss.message());
  return Status::Ok();
}

// "plan [##########..........]  51%  68000/133320 candidates" on one line of a terminal.
void DrawProgress(int64_t done, int64_t total) {
  const int width = 30;
  const double frac = total > 0 ? static_cast<double>(done) / total : 1.0;
  const int filled = static_cast<int>(frac * width);
  std::fprintf(stderr, "\rplan [%s%s] %3d%%  %lld/%lld candidates", std::string(filled, '#').c_str(),
               std::string(width - filled, '.').c_str(), static_cast<int>(100 * frac),
               static_cast<long long>(done), static_cast<long long>(total));
  std::fflush(stderr);
}

}  // namespace

int RunPlan(int argc, char** argv) {
  FlagSet flags("pipectl plan --model NAME --gpus N --gpu-memory-gib G [--global-batch B] [--top K] "
                "[--format text|json]",
                "Searches dp x tp x pp x vpp x schedule x micro-batch x ZeRO x recompute for the model on "
                "the cluster, prunes what breaks a rule or does not fit in memory (counting each reason), "
                "estimates the step time of the rest (compute at --efficiency of the peak, TP collectives, "
                "pipeline bubble from the schedule simulator, DP exchange once per step) and prints the "
                "fastest. Memory as `pipectl memory` computes it.");
  Options o;
  Declare(flags, o);
  if (int rc = ParseFlagsOrExit(flags, argc, argv, kVerb); rc >= 0) return rc;
  Status st;
  auto model = ResolveModel(flags, o.model);
  if (!model.ok()) return Fail(kVerb, model.status());
  planner::ClusterSpec cluster;
  planner::SearchSpace space;
  st = Build(flags, o, *model, &cluster, &space);
  if (!st.ok()) return Fail(kVerb, st);

  planner::PlanOptions po;
  po.top_k = o.top;
  po.cache_schedules = !o.no_cache;
  const bool bar = o.progress && isatty(STDERR_FILENO);
  if (bar) po.progress = DrawProgress;
  const auto t0 = std::chrono::steady_clock::now();
  auto result = planner::Plan(*model, cluster, space, po);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (bar) std::fprintf(stderr, "\r%80s\r", "");
  if (!result.ok()) return Fail(kVerb, result.status());
  std::string out;
  if (o.format == "json") {
    out = planner::PlanJson(*model, cluster, space, *result);
  } else {
    out = planner::PlanText(*model, cluster, space, *result);
    char line[128];
    std::snprintf(line, sizeof line, "(searched in %s, %.0f candidates/s)\n", memory::FormatSeconds(secs).c_str(),
                  secs > 0 ? result->candidates / secs : 0.0);
    out += line;
  }
  return EmitOutput(kVerb, out, o.out, "the plan");
}

}  // namespace pipecoord::cli
