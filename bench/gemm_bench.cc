// The CPU backend's GEMM steps (kernels/cpu/linear.h: F, B and W of each of a block's linear
// layers) against a bare OpenBLAS sgemm of the same M x N x K with no transposes, measured in the
// same run on the same thread count: how much of the library's speed on that shape each step gets
// (goal: >= 50 %), and what the double-accumulating reference loops (linear_reference.h, the
// GEMMs before) reach.
//   bazel run -c opt //bench:gemm_bench -- [--batch 2 --seq 128 --hidden 256]
#include <cblas.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/flags.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_reference.h"
#include "kernels/cpu/rng.h"

namespace {

using pipecoord::kernels::cpu::LinearDims;
namespace cpu = pipecoord::kernels::cpu;

std::vector<float> Random(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  cpu::Rng(seed).FillUniform(v.data(), n, -1, 1);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int batch = 2, seq = 128, hidden = 256, reps = 5;
  bool reference = true;
  pipecoord::FlagSet flags("gemm_bench [--batch B --seq S --hidden H --reps R]",
                           "Each GEMM step of a block against a bare sgemm of the same shape.");
  flags.Int("batch", &batch, "samples per micro-batch (default 2)");
  flags.Int("seq", &seq, "tokens per sample (default 128)");
  flags.Int("hidden", &hidden, "model width (default 256)");
  flags.Int("reps", &reps, "repetitions; the best counts (default 5)");
  flags.Bool("reference", &reference, "also time the reference loops (default on)");
  pipecoord::Status st = flags.Parse(argc - 1, argv + 1);
  if (!st.ok() || flags.help_requested()) {
    std::printf("%s\n%s", st.ToString().c_str(), flags.Help().c_str());
    return st.ok() ? 0 : 2;
  }
  const int64_t n = static_cast<int64_t>(batch) * seq, h = hidden;
  const int64_t f = ((8 * h + 2) / 3 + 63) / 64 * 64;
  struct Layer {
    const char* name;
    LinearDims d;
  };
  const Layer layers[] = {{"wq/wk/wv/wo [h,h]", {n, h, h}}, {"w1/w3 [f,h]", {n, h, f}}, {"w2 [h,f]", {n, f, h}}};
  std::printf("GEMM steps, n = b*s = %lld tokens, h %lld, f %lld, %d OpenBLAS thread(s), best of %d\n",
              static_cast<long long>(n), static_cast<long long>(h), static_cast<long long>(f),
              cpu::GemmThreads(), reps);
  std::printf("%-18s %-2s %6s %6s %6s  %9s %9s  %7s  %s\n", "layer", "", "M", "N", "K", "ours GF/s",
              "sgemm GF/s", "ratio", "reference loops GF/s");
  double worst = 1e100;
  for (const Layer& l : layers) {
    const LinearDims d = l.d;
    const auto x = Random(d.n * d.in, 1), w = Random(d.out * d.in, 2), dy = Random(d.n * d.out, 3);
    std::vector<float> y(d.n * d.out), dx(d.n * d.in), dw(d.out * d.in, 0.0f);
    for (const char* step : {"F", "B", "W"}) {
      const std::string s = step;
      // The step as a plain C[M, N] = A[M, K] B[K, N] product.
      const int64_t M = s == "W" ? d.out : d.n, N = s == "F" ? d.out : d.in,
                    K = s == "F" ? d.in : (s == "B" ? d.out : d.n);
      const auto a = Random(M * K, 4), b = Random(K * N, 5);
      std::vector<float> c(M * N);
      auto ours = [&] {
        if (s == "F") cpu::LinearForward(x.data(), w.data(), y.data(), d);
        if (s == "B") cpu::LinearBackwardInput(dy.data(), w.data(), dx.data(), d, false);
        if (s == "W") cpu::LinearBackwardWeight(dy.data(), x.data(), dw.data(), d);
      };
      auto ref = [&] {
        if (s == "F") cpu::LinearForwardReference(x.data(), w.data(), y.data(), d);
        if (s == "B") cpu::LinearBackwardInputReference(dy.data(), w.data(), dx.data(), d, false);
        if (s == "W") cpu::LinearBackwardWeightReference(dy.data(), x.data(), dw.data(), d);
      };
      auto bare = [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(M), static_cast<int>(N),
                    static_cast<int>(K), 1.0f, a.data(), static_cast<int>(K), b.data(), static_cast<int>(N),
                    0.0f, c.data(), static_cast<int>(N));
      };
      ours();
      bare();
      const double flop = 2.0 * M * N * K;
      const double t_bare = pipecoord::bench::BestOf(reps, bare);
      const double t_ours = pipecoord::bench::BestOf(reps, ours);
      const double t_ref = reference ? pipecoord::bench::BestOf(1, ref) : 0;
      const double ratio = t_bare / t_ours;
      worst = std::min(worst, ratio);
      std::printf("%-18s %-2s %6lld %6lld %6lld  %9.1f %9.1f  %6.0f%%  %.1f\n", l.name, step,
                  static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K),
                  flop / t_ours / 1e9, flop / t_bare / 1e9, 100 * ratio,
                  reference ? flop / t_ref / 1e9 : 0.0);
    }
  }
  std::printf("worst step: %.0f%% of the bare sgemm of its shape (goal >= 50%%): %s\n", 100 * worst,
              worst >= 0.5 ? "ok" : "MISSED");
  return worst >= 0.5 ? 0 : 1;
}
