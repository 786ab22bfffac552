// GemmContext (kernels/cuda/gemm.h) against a bare cuBLASLt matmul of the same shape, for the
// Llama-7B block's linear layers at hidden 4096 and n = 2048 tokens (seq 2048 x micro-batch 1):
// wq/wk/wv/wo [4096, 4096], w1/w3 [11008, 4096], w2 [4096, 11008]; each of F (y = x w^T),
// B (dx = dy w) and W (dw += dy^T x, fp32 dw) in bf16 with fp32 accumulation.
//
// The baseline sets up its own descriptors, layouts and heuristic query here (same workspace
// size, cudaMalloc'd buffers) and times only cublasLtMatmul, so the ratio shows what the
// context's per-call work (plan lookup, alignment check) costs. Both are timed with CUDA events
// around `iters` back-to-back calls after `warmup` calls, best of three alternating rounds.
// One line per case: "F y = x w^T  wq/wk/wv/wo ... ours X TFLOP/s  cuBLASLt Y TFLOP/s  ratio Z".
//
// Without a GPU it prints "no CUDA device: ..." and exits 0; any other failure exits 1.
//
// Run with `bazel run -c opt //kernels/cuda:gpu_gemm_bench [-- --warmup N --iters N]`. Built by
// nvcc as host code (kernels/cuda/BUILD), since cublasLt.h needs headers that the g++
// toolchain's CUDA target does not carry.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/cpu/linear.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm.h"
#include "kernels/device.h"

namespace pipecoord::kernels::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // GemmOptions' default

Status Cublas(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Internal(what + ": " + cublasLtGetStatusName(status) + " (" +
                  cublasLtGetStatusString(status) + ")");
}

// A device allocation freed on scope exit.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  Status Allocate(size_t bytes) {
    return CudaStatus(cudaMalloc(&ptr_, bytes), "cudaMalloc(" + std::to_string(bytes) + ")");
  }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// Fills a bf16 buffer with values uniform in [-1, 1) (a fixed LCG; the values only need to be
// ordinary numbers, not zeros or denormals that could flatter the timing).
Status FillBf16(void* device, int64_t count, uint32_t seed) {
  std::vector<uint16_t> host(static_cast<size_t>(count));
  uint32_t state = seed;
  for (uint16_t& h : host) {
    state = state * 1664525u + 1013904223u;
    const float value = static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
    h = FloatToBf16Bits(value);
  }
  return CudaStatus(cudaMemcpy(device, host.data(), host.size() * 2, cudaMemcpyHostToDevice),
                    "cudaMemcpy (inputs)");
}

enum class Step { kForward, kBackwardInput, kBackwardWeight };

const char* StepName(Step step) {
  switch (step) {
    case Step::kForward:
      return "F y = x w^T   ";
    case Step::kBackwardInput:
      return "B dx = dy w   ";
    case Step::kBackwardWeight:
      return "W dw += dy^T x";
  }
  return "?";
}

// The bare baseline: one cuBLASLt matmul, column-major, set up here from scratch.
//   F: y^T [out, n]  = op_T(w as [in, out]) * x^T [in, n]
//   B: dx^T [in, n]  = w as [in, out] * dy^T [out, n]
//   W: dw^T [in, out] = x^T [in, n] * op_T(dy^T as [out, n])   (fp32 C/D, beta 1)
class BareMatmul {
 public:
  BareMatmul() = default;
  BareMatmul(const BareMatmul&) = delete;
  BareMatmul& operator=(const BareMatmul&) = delete;
  ~BareMatmul() {
    if (c_ != nullptr) cublasLtMatrixLayoutDestroy(c_);
    if (b_ != nullptr) cublasLtMatrixLayoutDestroy(b_);
    if (a_ != nullptr) cublasLtMatrixLayoutDestroy(a_);
    if (desc_ != nullptr) cublasLtMatmulDescDestroy(desc_);
  }

  Status Init(cublasLtHandle_t handle, Step step, int64_t n, int64_t in, int64_t out) {
    handle_ = handle;
    cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
    cudaDataType_t c_type = CUDA_R_16BF;
    int64_t a_rows = 0, a_cols = 0, b_rows = 0, b_cols = 0, c_rows = 0, c_cols = 0;
    switch (step) {
      case Step::kForward:
        transa = CUBLAS_OP_T;
        a_rows = in, a_cols = out, b_rows = in, b_cols = n, c_rows = out, c_cols = n;
        break;
      case Step::kBackwardInput:
        a_rows = in, a_cols = out, b_rows = out, b_cols = n, c_rows = in, c_cols = n;
        break;
      case Step::kBackwardWeight:
        transb = CUBLAS_OP_T;
        c_type = CUDA_R_32F;
        beta_ = 1.0f;
        a_rows = in, a_cols = n, b_rows = out, b_cols = n, c_rows = in, c_cols = out;
        break;
    }
    PIPECOORD_RETURN_IF_ERROR(Cublas(
        cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate"));
    PIPECOORD_RETURN_IF_ERROR(Cublas(
        cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)),
        "TRANSA"));
    PIPECOORD_RETURN_IF_ERROR(Cublas(
        cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)),
        "TRANSB"));
    PIPECOORD_RETURN_IF_ERROR(
        Cublas(cublasLtMatrixLayoutCreate(&a_, CUDA_R_16BF, a_rows, a_cols, a_rows), "layout A"));
    PIPECOORD_RETURN_IF_ERROR(
        Cublas(cublasLtMatrixLayoutCreate(&b_, CUDA_R_16BF, b_rows, b_cols, b_rows), "layout B"));
    PIPECOORD_RETURN_IF_ERROR(
        Cublas(cublasLtMatrixLayoutCreate(&c_, c_type, c_rows, c_cols, c_rows), "layout C"));

    cublasLtMatmulPreference_t pref = nullptr;
    PIPECOORD_RETURN_IF_ERROR(Cublas(cublasLtMatmulPreferenceCreate(&pref), "PreferenceCreate"));
    const uint64_t workspace = kWorkspaceBytes;
    Status st =
        Cublas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace, sizeof(workspace)),
               "MAX_WORKSPACE_BYTES");
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    if (st.ok()) {
      st = Cublas(cublasLtMatmulAlgoGetHeuristic(handle, desc_, a_, b_, c_, c_, pref, 1, &result,
                                                 &returned),
                  "AlgoGetHeuristic");
    }
    cublasLtMatmulPreferenceDestroy(pref);
    PIPECOORD_RETURN_IF_ERROR(st);
    if (returned < 1) return Internal("AlgoGetHeuristic: no algorithm");
    algo_ = result.algo;
    return Status::Ok();
  }

  // A is the step's second input, B its first, C = D the output (as in GemmContext).
  Status Run(const void* first, const void* second, void* out, void* workspace,
             cudaStream_t stream) const {
    const float alpha = 1.0f;
    return Cublas(cublasLtMatmul(handle_, desc_, &alpha, second, a_, first, b_, &beta_, out, c_,
                                 out, c_, &algo_, workspace, kWorkspaceBytes, stream),
                  "cublasLtMatmul");
  }

 private:
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  float beta_ = 0.0f;
};

// Seconds per call of `call`, timed with CUDA events around `iters` calls after `warmup`.
Status TimeCalls(const std::function<Status()>& call, int warmup, int iters, cudaStream_t stream,
                 double* seconds) {
  for (int i = 0; i < warmup; ++i) PIPECOORD_RETURN_IF_ERROR(call());
  cudaEvent_t start = nullptr, stop = nullptr;
  PIPECOORD_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  Status st = CudaStatus(cudaEventCreate(&stop), "cudaEventCreate");
  if (st.ok()) st = CudaStatus(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; st.ok() && i < iters; ++i) st = call();
  if (st.ok()) st = CudaStatus(cudaEventRecord(stop, stream), "cudaEventRecord");
  if (st.ok()) st = CudaStatus(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  if (st.ok()) st = CudaStatus(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  *seconds = ms * 1e-3 / iters;
  return st;
}

struct Layer {
  const char* names;
  int64_t in, out;
};

Status RunBench(int warmup, int iters) {
  constexpr int64_t kTokens = 2048;
  const Layer layers[] = {
      {"wq/wk/wv/wo", 4096, 4096},
      {"w1/w3      ", 4096, 11008},
      {"w2         ", 11008, 4096},
  };
  PIPECOORD_CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  PIPECOORD_CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream));
  auto context = GemmContext::Create(GemmOptions{.stream = stream});
  if (!context.ok()) return context.status();
  cublasLtHandle_t handle = nullptr;
  PIPECOORD_RETURN_IF_ERROR(Cublas(cublasLtCreate(&handle), "cublasLtCreate"));
  DeviceMemory workspace;
  PIPECOORD_RETURN_IF_ERROR(workspace.Allocate(kWorkspaceBytes));

  std::printf(
      "bf16 inputs, fp32 accumulation; n = %lld tokens; %d calls after %d warm-up, best "
      "of 3 rounds\n",
      static_cast<long long>(kTokens), iters, warmup);
  for (const Layer& layer : layers) {
    const cpu::LinearDims d{kTokens, layer.in, layer.out};
    DeviceMemory x, w, y, dy, dx, dw;
    PIPECOORD_RETURN_IF_ERROR(x.Allocate(d.n * d.in * 2));
    PIPECOORD_RETURN_IF_ERROR(w.Allocate(d.out * d.in * 2));
    PIPECOORD_RETURN_IF_ERROR(y.Allocate(d.n * d.out * 2));
    PIPECOORD_RETURN_IF_ERROR(dy.Allocate(d.n * d.out * 2));
    PIPECOORD_RETURN_IF_ERROR(dx.Allocate(d.n * d.in * 2));
    PIPECOORD_RETURN_IF_ERROR(dw.Allocate(d.out * d.in * 4));
    PIPECOORD_RETURN_IF_ERROR(FillBf16(x.get(), d.n * d.in, 1));
    PIPECOORD_RETURN_IF_ERROR(FillBf16(w.get(), d.out * d.in, 2));
    PIPECOORD_RETURN_IF_ERROR(FillBf16(dy.get(), d.n * d.out, 3));
    PIPECOORD_CUDA_RETURN_IF_ERROR(cudaMemset(dw.get(), 0, d.out * d.in * 4));
    auto* xb = static_cast<const __nv_bfloat16*>(x.get());
    auto* wb = static_cast<const __nv_bfloat16*>(w.get());
    auto* dyb = static_cast<const __nv_bfloat16*>(dy.get());

    for (Step step : {Step::kForward, Step::kBackwardInput, Step::kBackwardWeight}) {
      GemmContext& ctx = **context;
      std::function<Status()> ours, bare_call;
      BareMatmul bare;
      PIPECOORD_RETURN_IF_ERROR(bare.Init(handle, step, d.n, d.in, d.out));
      switch (step) {
        case Step::kForward:
          ours = [&] { return ctx.Forward(xb, wb, static_cast<__nv_bfloat16*>(y.get()), d); };
          bare_call = [&] { return bare.Run(x.get(), w.get(), y.get(), workspace.get(), stream); };
          break;
        case Step::kBackwardInput:
          ours = [&] {
            return ctx.BackwardInput(dyb, wb, static_cast<__nv_bfloat16*>(dx.get()), d, false);
          };
          bare_call = [&] {
            return bare.Run(dy.get(), w.get(), dx.get(), workspace.get(), stream);
          };
          break;
        case Step::kBackwardWeight:
          ours = [&] { return ctx.BackwardWeight(dyb, xb, static_cast<float*>(dw.get()), d); };
          bare_call = [&] {
            return bare.Run(dy.get(), x.get(), dw.get(), workspace.get(), stream);
          };
          break;
      }
      double ours_s = 1e30, bare_s = 1e30;
      for (int round = 0; round < 3; ++round) {
        double s = 0;
        PIPECOORD_RETURN_IF_ERROR(TimeCalls(bare_call, warmup, iters, stream, &s));
        bare_s = std::min(bare_s, s);
        PIPECOORD_RETURN_IF_ERROR(TimeCalls(ours, warmup, iters, stream, &s));
        ours_s = std::min(ours_s, s);
      }
      const double flops = 2.0 * d.n * d.in * d.out;
      std::printf(
          "%s  %s [%lld, %lld]  ours %7.1f TFLOP/s  bare cuBLASLt %7.1f TFLOP/s  "
          "ratio %.3f\n",
          StepName(step), layer.names, static_cast<long long>(layer.out),
          static_cast<long long>(layer.in), flops / ours_s * 1e-12, flops / bare_s * 1e-12,
          bare_s / ours_s);
      std::fflush(stdout);
    }
  }
  context->reset();
  cublasLtDestroy(handle);
  cudaStreamDestroy(stream);
  return Status::Ok();
}

}  // namespace
}  // namespace pipecoord::kernels::cuda

int main(int argc, char** argv) {
  int warmup = 10, iters = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--warmup") == 0) warmup = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::atoi(argv[i + 1]);
  }
  if (warmup < 0 || iters < 1) {
    std::fprintf(stderr, "usage: gpu_gemm_bench [--warmup N] [--iters N>=1]\n");
    return 2;
  }
  auto devices = pipecoord::kernels::QueryDevices();
  if (!devices.ok()) {
    if (devices.status().code() == pipecoord::Code::kUnavailable) {
      std::printf("%s\n", devices.status().message().c_str());  // "no CUDA device: ..."
      return 0;
    }
    std::fprintf(stderr, "gpu_gemm_bench: %s\n", devices.status().ToString().c_str());
    return 1;
  }
  std::printf("device 0: %s\n", (*devices)[0].name.c_str());
  const pipecoord::Status st = pipecoord::kernels::cuda::RunBench(warmup, iters);
  if (!st.ok()) {
    std::fprintf(stderr, "gpu_gemm_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
