// CPU reference model: the F, B and W costs of one transformer block, and the split backward
// (B then W, as zero-bubble schedules run it) against the naive fused backward (each op's
// weight gradient right after its input gradient) measured in the same run.
//   bazel run -c opt //bench:model_bench
// The printed ratios are what a schedule's cost model wants: f = 1, b = B/F, w = W/F.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench/bench_util.h"
#include "kernels/cpu/rng.h"
#include "worker/model/stage_model.h"

namespace {

using namespace pipecoord::model;
using Clock = std::chrono::steady_clock;

template <typename Fn>
double Time(Fn&& fn) {
  const auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void Check(const pipecoord::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "model_bench: %s\n", s.ToString().c_str());
    std::exit(1);
  }
}

}  // namespace

int main() {
  // One block: b 2, s 128, h 256, 4 heads, SwiGLU width 704 (the 8h/3 rule).
  const ModelConfig config{1, 256, 0, 4, 256, 128, 1};
  const BatchShape batch{2, 1};
  auto made = StageModel::Create(config, StageShard{0, 0, 1, false, false}, batch);
  Check(made.status());
  StageModel& block = **made;
  pipecoord::kernels::HostBuffer<float> x(block.activation_size()), dy(block.activation_size());
  pipecoord::kernels::cpu::Rng rng(1);
  rng.FillUniform(x.data(), static_cast<int64_t>(x.size()), -1, 1);
  rng.FillUniform(dy.data(), static_cast<int64_t>(dy.size()), -1, 1);

  const int reps = 15;
  double f = 1e100, b = 1e100, w = 1e100, fused = 1e100;
  int64_t after_f = 0, after_b = 0;
  for (int r = 0; r < reps; ++r) {
    StageInput in{{}, x, {}};
    pipecoord::kernels::HostBuffer<float> g = dy;
    f = std::min(f, Time([&] { Check(block.Forward(0, std::move(in)).status()); }));
    after_f = block.ActivationBytes();
    b = std::min(b, Time([&] { Check(block.BackwardInput(0, std::move(g)).status()); }));
    after_b = block.ActivationBytes();
    w = std::min(w, Time([&] { Check(block.BackwardWeight(0)); }));
    // The baseline on the same weights and input: F again (untimed), then the fused backward.
    StageInput in2{{}, x, {}};
    pipecoord::kernels::HostBuffer<float> g2 = dy;
    Check(block.Forward(0, std::move(in2)).status());
    fused = std::min(fused, Time([&] { Check(block.BackwardFused(0, std::move(g2)).status()); }));
  }
  std::printf("one block, b=%d s=%d h=%d heads=%d ffn=%d, best of %d:\n", batch.micro_batch_size,
              config.seq_len, config.hidden, config.heads, config.FfnHidden(), reps);
  std::printf("  F %.4f s   B %.4f s   W %.4f s   fused BW %.4f s\n", f, b, w, fused);
  std::printf("  W/B = %.2f   (B+W)/F = %.2f   B/F = %.2f   W/F = %.2f\n", w / b, (b + w) / f,
              b / f, w / f);
  std::printf("  saved activations: %.2f MiB after F, %.2f MiB after B (held until W)\n",
              after_f / 1048576.0, after_b / 1048576.0);
  // Splitting must cost (almost) nothing over the fused pass: same kernels, same arithmetic.
  const bool ok = pipecoord::bench::Report("split backward B+W", b + w, 1.10 * fused,
                                           "fused BW (target: within 10%)", fused);
  return ok ? 0 : 1;
}
