// One transformer block of the CPU backend (worker/model/ on kernels/cpu/): F, B and W of one
// micro-batch, best of --reps, at any shape. Prints one JSON object; bench/torch_cpu_block_bench.py
// runs it beside PyTorch eager on the same shapes and prints the ratio.
//   bazel run -c opt //bench:cpu_block_bench -- --batch 2 --seq 128 --hidden 256 --heads 4
// Threads: the GEMMs' (kernels/cpu/linear.h GemmThreads(): 1 unless PIPECOORD_CPU_THREADS);
// every other op runs on the calling thread. Freed memory stays in the process as in the worker
// (kernels/cpu/freed_memory.h); --keep-freed-memory 0 measures glibc's default.
#include <cstdio>
#include <vector>

#include "bench/bench_util.h"
#include "common/flags.h"
#include "kernels/cpu/freed_memory.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/rng.h"
#include "worker/model/stage_model.h"

int main(int argc, char** argv) {
  using namespace pipecoord;
  int batch = 2, seq = 128, hidden = 256, heads = 4, ffn = 0, reps = 5, keep_freed_memory = 1;
  FlagSet flags("cpu_block_bench [--batch B --seq S --hidden H --heads N --ffn F --reps R]",
                "F, B and W of one CPU transformer block, best of R, as JSON.");
  flags.Int("batch", &batch, "samples per micro-batch (default 2)");
  flags.Int("seq", &seq, "tokens per sample (default 128)");
  flags.Int("hidden", &hidden, "model width (default 256)");
  flags.Int("heads", &heads, "attention heads (default 4)");
  flags.Int("ffn", &ffn, "SwiGLU width; 0: the 8h/3 rule (default 0)");
  flags.Int("reps", &reps, "repetitions; the best counts (default 5)");
  flags.Int("keep-freed-memory", &keep_freed_memory,
            "1: keep freed memory for reuse, as the worker does; 0: glibc's default (default 1)");
  std::vector<std::string> positional;
  Status st = flags.Parse(argc - 1, argv + 1, &positional);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (keep_freed_memory != 0 && !kernels::cpu::KeepFreedHostMemory()) {
    std::fprintf(stderr, "cpu_block_bench: mallopt refused the settings\n");
    return 2;
  }
  model::ModelConfig config;
  config.layers = 1;
  config.hidden = hidden;
  config.ffn_hidden = ffn;
  config.heads = heads;
  config.vocab = 16;
  config.seq_len = seq;
  config.seed = 1;
  auto made = st.ok() ? model::StageModel::Create(config, model::StageShard{0, 0, 1, false, false},
                                                  model::BatchShape{batch, 1})
                      : Result<std::unique_ptr<model::StageModel>>(st);
  if (!made.ok()) {
    std::fprintf(stderr, "cpu_block_bench: %s\n", made.status().ToString().c_str());
    return 2;
  }
  model::StageModel& block = **made;
  kernels::HostBuffer<float> x(block.activation_size()), dy(block.activation_size());
  kernels::cpu::Rng rng(1);
  rng.FillUniform(x.data(), static_cast<int64_t>(x.size()), -1, 1);
  rng.FillUniform(dy.data(), static_cast<int64_t>(dy.size()), -1, 1);
  auto check = [](const Status& s) {
    if (!s.ok()) {
      std::fprintf(stderr, "cpu_block_bench: %s\n", s.ToString().c_str());
      std::exit(1);
    }
  };
  double f = 1e100, b = 1e100, w = 1e100;
  for (int r = 0; r < reps + 1; ++r) {  // the first round warms up
    model::StageInput in{{}, x, {}};
    kernels::HostBuffer<float> g = dy;
    const double tf = bench::BestOf(1, [&] { check(block.Forward(0, std::move(in)).status()); });
    const double tb = bench::BestOf(1, [&] { check(block.BackwardInput(0, std::move(g)).status()); });
    const double tw = bench::BestOf(1, [&] { check(block.BackwardWeight(0)); });
    if (r == 0) continue;
    f = std::min(f, tf);
    b = std::min(b, tb);
    w = std::min(w, tw);
  }
  std::printf("{\"batch\": %d, \"seq\": %d, \"hidden\": %d, \"heads\": %d, \"ffn\": %d, "
              "\"gemm_threads\": %d, \"keep_freed_memory\": %d, \"reps\": %d, \"f\": %.6f, "
              "\"b\": %.6f, \"w\": %.6f}\n",
              batch, seq, hidden, heads, config.FfnHidden(), kernels::cpu::GemmThreads(),
              keep_freed_memory, reps, f, b, w);
  return 0;
}
