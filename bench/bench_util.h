// Timing helpers for benchmarks. Every benchmark prints its figure next to a named baseline
// measured in the same run, because absolute times on shared machines are not comparable.
#ifndef PIPECOORD_BENCH_BENCH_UTIL_H_
#define PIPECOORD_BENCH_BENCH_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

namespace pipecoord::bench {

// Best of `reps` runs of fn, in seconds (the minimum filters out scheduler noise).
inline double BestOf(int reps, const std::function<void()>& fn) {
  double best = 1e100;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  return best;
}

// "name: 0.0812 s (target < 0.2 s: ok), 1.93x baseline 1f1b p=64 m=1024 (0.0421 s)"
inline bool Report(const char* name, double seconds, double target_s, const char* baseline,
                   double baseline_s) {
  const bool ok = seconds < target_s;
  std::printf("%-44s %8.4f s  (target < %.2f s: %s)  ratio %.2fx vs baseline %s (%.4f s)\n", name,
              seconds, target_s, ok ? "ok" : "MISSED", seconds / baseline_s, baseline, baseline_s);
  return ok;
}

}  // namespace pipecoord::bench

#endif  // PIPECOORD_BENCH_BENCH_UTIL_H_
