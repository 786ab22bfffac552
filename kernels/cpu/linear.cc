#include "kernels/cpu/linear.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include <unistd.h>

#include "kernels/cpu/linear_reference.h"

// OpenBLAS's own entry point (not in every cblas.h: declared here so any OpenBLAS flavour's
// header serves).
extern "C" void openblas_set_num_threads(int num_threads);
extern "C" char* openblas_get_corename(void);

namespace {

// OpenBLAS picks its kernels when it loads, before main, from the CPU's family and model, or from
// OPENBLAS_CORETYPE. Debian 12's 0.3.21 does not know CPUs newer than it (Emerald Rapids, family 6
// model 207, reads as "Intel(R) Xeon(R) Processor") and falls back to its generic Prescott (SSE3)
// kernels (perf: half of a worker's time in sgemm_kernel_PRESCOTT; a pp 2 job of the demo's
// model took 173 ms a step there, 64 ms on the AVX-512 kernels, docs/cpu-backend.md). So a
// process that got that fallback on a CPU with AVX-512 (or AVX2 + FMA) runs itself again, once,
// with OPENBLAS_CORETYPE=SkylakeX (Haswell): the same binary, arguments and pid. The variable then set stops a second exec, and a user's own setting
// is never overridden. Every binary that links these GEMMs does this, so a worker and the test
// that checks it use the same kernels (the same bits).
const char* BetterBlasCore() {
  if (std::string(pipecoord::kernels::cpu::BlasCoreName()) != "Prescott") return nullptr;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512cd")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

__attribute__((constructor)) void RunAgainWithKnownBlasCore(int argc, char** argv, char** /*envp*/) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || argc < 1 || argv == nullptr) return;
  const char* core = BetterBlasCore();
  if (core == nullptr) return;
  if (setenv("OPENBLAS_CORETYPE", core, 1) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: go on with the fallback kernels
}

}  // namespace

namespace pipecoord::kernels::cpu {
namespace {

std::atomic<int> g_threads{0};  // 0: not yet set
std::mutex g_threads_mu;

// Sets OpenBLAS's thread count once before the first GEMM (and on every change).
void EnsureThreads() {
  if (g_threads.load(std::memory_order_acquire) > 0) return;
  std::lock_guard<std::mutex> lock(g_threads_mu);
  if (g_threads.load(std::memory_order_relaxed) > 0) return;
  int n = 1;
  if (const char* env = std::getenv("PIPECOORD_CPU_THREADS")) {
    const int v = std::atoi(env);
    if (v > 0) n = v;
  }
  openblas_set_num_threads(n);
  g_threads.store(n, std::memory_order_release);
}

int Int(int64_t v) { return static_cast<int>(v); }

bool UseReference() { return ReferenceKernelsRequested(); }

}  // namespace

bool ReferenceKernelsRequested() {
  static const bool reference = [] {
    const char* env = std::getenv("PIPECOORD_CPU_GEMM");
    return env != nullptr && std::string(env) == "reference";
  }();
  return reference;
}

int GemmThreads() {
  EnsureThreads();
  return g_threads.load(std::memory_order_acquire);
}

const char* BlasCoreName() {
  const char* name = openblas_get_corename();
  return name != nullptr ? name : "";
}

void SetGemmThreads(int threads) {
  std::lock_guard<std::mutex> lock(g_threads_mu);
  const int n = threads > 0 ? threads : 1;
  openblas_set_num_threads(n);
  g_threads.store(n, std::memory_order_release);
}

namespace {
thread_local bool t_corrupt_gemm = false;
thread_local bool t_corrupt_next = false;

// The `corrupt` fault: one mantissa bit (bit 20, a 1/8 relative change) of the middle element;
// the `flip` fault: of the last one (the middle of q is a sequence's first token, whose attention
// sees only itself, so a wrong q there changes nothing downstream).
int64_t FaultAt(int64_t n) {
  if ((!t_corrupt_gemm && !t_corrupt_next) || n == 0) return -1;
  const int64_t at = t_corrupt_gemm ? n / 2 : n - 1;
  t_corrupt_next = false;
  return at;
}

void Corrupt(float* y, int64_t n) {
  const int64_t at = FaultAt(n);
  if (at < 0) return;
  uint32_t bits;
  std::memcpy(&bits, &y[at], sizeof bits);
  bits ^= 1u << 20;
  std::memcpy(&y[at], &bits, sizeof bits);
}
}  // namespace

void SetGemmCorruption(bool on) { t_corrupt_gemm = on; }
void CorruptNextGemm() { t_corrupt_next = true; }
bool GemmCorruption() { return t_corrupt_gemm; }
int64_t TakeGemmFault(int64_t n) { return FaultAt(n); }

template <>
void LinearForward<float>(const float* x, const float* w, float* y, const LinearDims& d) {
  if (UseReference()) {
    LinearForwardReference(x, w, y, d);
    return Corrupt(y, d.n * d.out);
  }
  if (d.n == 0 || d.out == 0) return;
  if (d.in == 0) {
    std::fill(y, y + d.n * d.out, 0.0f);
    return Corrupt(y, d.n * d.out);
  }
  EnsureThreads();
  // y [n, out] = x [n, in] . w [out, in]^T
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int(d.n), Int(d.out), Int(d.in), 1.0f, x,
              Int(d.in), w, Int(d.in), 0.0f, y, Int(d.out));
  Corrupt(y, d.n * d.out);
}

template <>
void LinearBackwardInput<float>(const float* dy, const float* w, float* dx, const LinearDims& d,
                                bool accumulate) {
  if (UseReference()) return LinearBackwardInputReference(dy, w, dx, d, accumulate);
  if (d.n == 0 || d.in == 0) return;
  if (d.out == 0) {
    if (!accumulate) std::fill(dx, dx + d.n * d.in, 0.0f);
    return;
  }
  EnsureThreads();
  // dx [n, in] (+)= dy [n, out] . w [out, in]
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int(d.n), Int(d.in), Int(d.out), 1.0f, dy,
              Int(d.out), w, Int(d.in), accumulate ? 1.0f : 0.0f, dx, Int(d.in));
}

template <>
void LinearBackwardWeight<float>(const float* dy, const float* x, float* dw, const LinearDims& d) {
  if (UseReference()) return LinearBackwardWeightReference(dy, x, dw, d);
  if (d.out == 0 || d.in == 0 || d.n == 0) return;
  EnsureThreads();
  // dw [out, in] += dy [n, out]^T . x [n, in]
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Int(d.out), Int(d.in), Int(d.n), 1.0f, dy,
              Int(d.out), x, Int(d.in), 1.0f, dw, Int(d.in));
}

template <>
void LinearForward<double>(const double* x, const double* w, double* y, const LinearDims& d) {
  LinearForwardReference(x, w, y, d);
}

template <>
void LinearBackwardInput<double>(const double* dy, const double* w, double* dx, const LinearDims& d,
                                 bool accumulate) {
  LinearBackwardInputReference(dy, w, dx, d, accumulate);
}

template <>
void LinearBackwardWeight<double>(const double* dy, const double* x, double* dw,
                                  const LinearDims& d) {
  LinearBackwardWeightReference(dy, x, dw, d);
}

}  // namespace pipecoord::kernels::cpu
