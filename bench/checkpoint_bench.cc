// The restart policy's cost: the same job run with a checkpoint at every step (the worst case)
// against the same job without checkpoints (the baseline), interleaved and best of several runs.
// Also the checkpoint write alone (encode, write, fsync, rename) in MB/s.
//   bazel run //bench:checkpoint_bench
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "bench/bench_util.h"
#include "bench/cpu_bench_job.h"
#include "worker/checkpoint/async_writer.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/daemon/local_run.h"

namespace {

using namespace pipecoord;

v1::JobSpec Job(int checkpoint_every) {
  v1::JobSpec s = bench::CpuBenchJob("1f1b", 8);
  s.set_checkpoint_every(checkpoint_every);
  return s;
}

}  // namespace

int main() {
  const std::string dir = (std::filesystem::temp_directory_path() / "pipecoord-checkpoint-bench").string();
  worker::LocalCheckpoints ck;
  ck.dir = dir;
  double plain = 1e100, saving = 1e100;
  for (int rep = 0; rep < 5; ++rep) {  // interleaved, so drift hits both alike
    auto a = worker::RunLocally(Job(0));
    auto b = worker::RunLocally(Job(1), {}, ck);
    if (!a.ok() || !b.ok()) {
      std::fprintf(stderr, "checkpoint_bench: %s\n", (!a.ok() ? a.status() : b.status()).ToString().c_str());
      return 1;
    }
    plain = std::min(plain, a->wall_seconds);
    saving = std::min(saving, b->wall_seconds);
  }
  std::printf("8 steps, 1f1b pp 2, h 128, 4 layers: checkpoint every step %.4f s, ratio %.3fx vs baseline no checkpoints (%.4f s)\n",
              saving, saving / plain, plain);

  std::vector<float> weights(8 << 20, 0.5f);  // 32 MiB
  std::vector<worker::StateTensor> tensors = {{"w", weights}};
  const double write_s = bench::BestOf(3, [&] { (void)worker::WriteCheckpointFile(dir, "bench", 0, {0, 1}, tensors); });
  const double encode_s = bench::BestOf(3, [&] { (void)worker::EncodeCheckpoint({0, 1}, tensors); });
  std::printf("write 32 MiB checkpoint (encode + write + fsync + rename): %.4f s = %.0f MB/s, ratio %.2fx vs baseline encode alone (%.4f s)\n",
              write_s, 32 * 1.048576 / write_s, write_s / encode_s, encode_s);
  // What the training loop waits for with the background writer: the staging copy only.
  worker::AsyncCheckpointWriter writer(dir, "bench-async", 0);
  double save_s = 1e100;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)writer.Save({rep, 1}, tensors);
    save_s = std::min(save_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    (void)writer.Wait();
  }
  std::printf("step's wait at an asynchronous save of 32 MiB (staging copy): %.4f s, ratio %.3fx vs baseline synchronous write (%.4f s)\n",
              save_s, save_s / write_s, write_s);
  std::filesystem::remove_all(dir);
  return 0;
}
