// Planner speed: the full search space for a 70B-class model on 1024 GPUs (llama2-70b, global
// batch 1024 sequences), in candidates per second, against the target of 10 s. Baselines, each
// measured in the same run: the same search building schedule profiles on one thread; and, on a
// space small enough to finish (llama2-7b on 64 GPUs), the search with the schedule-profile
// cache disabled (a schedule generated and simulated per candidate).
#include <cstdio>

#include "bench/bench_util.h"
#include "memory/presets.h"
#include "planner/planner.h"

namespace {

using namespace pipecoord;

planner::PlanResult Run(const char* model, int gpus, int global_batch, bool cache, int threads = 0) {
  planner::ClusterSpec c;
  c.gpus = gpus;
  c.gpu_memory_bytes = int64_t{80} << 30;
  planner::SearchSpace s;
  s.global_batch = global_batch;
  planner::PlanOptions o;
  o.cache_schedules = cache;
  o.threads = threads;
  auto r = planner::Plan(*memory::FindModelPreset(model), c, s, o);
  if (!r.ok()) {
    std::fprintf(stderr, "plan failed: %s\n", r.status().ToString().c_str());
    std::exit(1);
  }
  return *r;
}

}  // namespace

int main() {
  planner::PlanResult big, big1;
  const double big_s = bench::BestOf(3, [&] { big = Run("llama2-70b", 1024, 1024, true); });
  const double big1_s = bench::BestOf(3, [&] { big1 = Run("llama2-70b", 1024, 1024, true, 1); });
  planner::PlanResult small_cached, small_uncached;
  const double cached_s = bench::BestOf(3, [&] { small_cached = Run("llama2-7b", 64, 256, true); });
  const double uncached_s = bench::BestOf(1, [&] { small_uncached = Run("llama2-7b", 64, 256, false); });

  std::printf("llama2-70b on 1024 GPUs: %lld candidates (%lld feasible), %lld schedules simulated, "
              "%.0f candidates/s\n",
              static_cast<long long>(big.candidates), static_cast<long long>(big.feasible),
              static_cast<long long>(big.schedule_profiles), big.candidates / big_s);
  bench::Report("plan llama2-70b, 1024 GPUs", big_s, 10.0, "profiles on one thread", big1_s);
  std::printf("llama2-7b on 64 GPUs: %lld candidates; cached %.0f candidates/s, uncached %.0f "
              "candidates/s\n",
              static_cast<long long>(small_cached.candidates), small_cached.candidates / cached_s,
              small_uncached.candidates / uncached_s);
  bench::Report("plan llama2-7b, 64 GPUs, cached", cached_s, 10.0, "bubble cache disabled", uncached_s);
  return 0;
}
