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
// After those lines, for each W shape, what the fp32 gradient costs: our W (fp32 dw, beta 1, as
// Megatron-LM's main_grad with gradient accumulation fusion) against a bare cuBLASLt W that
// writes D = dy^T x in bf16 with beta 0 (what an eager framework with bf16 parameters and bf16
// gradients, e.g. PyTorch eager, runs), and against one that writes fp32 D with beta 0 (a first
// micro-batch: fp32 output without reading the accumulator), both fp32 compute, timed in the same
// alternating rounds as our W and the fp32 beta-1 baseline above. The ratios are bare time / our
// time, so 0.86 means ours takes 1/0.86 as long.
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
// W's output can instead be bf16 or fp32 with beta 0 (WeightOutput), for the comparison above.
enum class WeightOutput {
  kFp32Accumulate,  // fp32 C = D, beta 1: what GemmContext::BackwardWeight does
  kBf16Overwrite,   // bf16 D, beta 0: an eager framework's bf16 gradient
  kFp32Overwrite,   // fp32 D, beta 0: a first micro-batch, no read of the accumulator
};

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

  Status Init(cublasLtHandle_t handle, Step step, int64_t n, int64_t in, int64_t out,
              WeightOutput weight_output = WeightOutput::kFp32Accumulate) {
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
        c_type = weight_output == WeightOutput::kBf16Overwrite ? CUDA_R_16BF : CUDA_R_32F;
        beta_ = weight_output == WeightOutput::kFp32Accumulate ? 1.0f : 0.0f;
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
  int per_block;  // how many of the block's linear layers have this shape
};

Status RunBench(int warmup, int iters) {
  constexpr int64_t kTokens = 2048;
  const Layer layers[] = {
      {"wq/wk/wv/wo", 4096, 4096, 4},
      {"w1/w3      ", 4096, 11008, 2},
      {"w2         ", 11008, 4096, 1},
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
  // The W comparison's lines, printed after the lines above (whose format stays as it was).
  std::vector<std::string> weight_output_lines;
  // Seconds of one block's seven W GEMMs: ours, bf16 =, fp32 =, fp32 += (layer.per_block each).
  double block_s[4] = {0, 0, 0, 0};
  for (const Layer& layer : layers) {
    const cpu::LinearDims d{kTokens, layer.in, layer.out};
    DeviceMemory x, w, y, dy, dx, dw, dw_bf16;
    PIPECOORD_RETURN_IF_ERROR(x.Allocate(d.n * d.in * 2));
    PIPECOORD_RETURN_IF_ERROR(w.Allocate(d.out * d.in * 2));
    PIPECOORD_RETURN_IF_ERROR(y.Allocate(d.n * d.out * 2));
    PIPECOORD_RETURN_IF_ERROR(dy.Allocate(d.n * d.out * 2));
    PIPECOORD_RETURN_IF_ERROR(dx.Allocate(d.n * d.in * 2));
    PIPECOORD_RETURN_IF_ERROR(dw.Allocate(d.out * d.in * 4));
    PIPECOORD_RETURN_IF_ERROR(dw_bf16.Allocate(d.out * d.in * 2));
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
      // W only: the bf16-output and fp32 beta-0 baselines (empty for F and B).
      std::vector<std::function<Status()>> weight_calls;
      BareMatmul bare_bf16, bare_fp32_fresh;
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
          PIPECOORD_RETURN_IF_ERROR(bare_bf16.Init(handle, step, d.n, d.in, d.out,
                                                   WeightOutput::kBf16Overwrite));
          PIPECOORD_RETURN_IF_ERROR(bare_fp32_fresh.Init(handle, step, d.n, d.in, d.out,
                                                         WeightOutput::kFp32Overwrite));
          weight_calls.push_back([&] {
            return bare_bf16.Run(dy.get(), x.get(), dw_bf16.get(), workspace.get(), stream);
          });
          weight_calls.push_back([&] {
            return bare_fp32_fresh.Run(dy.get(), x.get(), dw.get(), workspace.get(), stream);
          });
          break;
      }
      double ours_s = 1e30, bare_s = 1e30;
      std::vector<double> weight_s(weight_calls.size(), 1e30);
      for (int round = 0; round < 3; ++round) {
        double s = 0;
        PIPECOORD_RETURN_IF_ERROR(TimeCalls(bare_call, warmup, iters, stream, &s));
        bare_s = std::min(bare_s, s);
        PIPECOORD_RETURN_IF_ERROR(TimeCalls(ours, warmup, iters, stream, &s));
        ours_s = std::min(ours_s, s);
        for (size_t i = 0; i < weight_calls.size(); ++i) {
          PIPECOORD_RETURN_IF_ERROR(TimeCalls(weight_calls[i], warmup, iters, stream, &s));
          weight_s[i] = std::min(weight_s[i], s);
        }
      }
      const double flops = 2.0 * d.n * d.in * d.out;
      std::printf(
          "%s  %s [%lld, %lld]  ours %7.1f TFLOP/s  bare cuBLASLt %7.1f TFLOP/s  "
          "ratio %.3f\n",
          StepName(step), layer.names, static_cast<long long>(layer.out),
          static_cast<long long>(layer.in), flops / ours_s * 1e-12, flops / bare_s * 1e-12,
          bare_s / ours_s);
      std::fflush(stdout);
      if (!weight_calls.empty()) {
        char line[320];
        std::snprintf(line, sizeof(line),
                      "W  %s [%lld, %lld]  ours fp32 += %.4f ms  bf16 = %.4f ms (ratio %.3f)  "
                      "fp32 = %.4f ms (ratio %.3f)  fp32 += %.4f ms",
                      layer.names, static_cast<long long>(layer.out),
                      static_cast<long long>(layer.in), ours_s * 1e3, weight_s[0] * 1e3,
                      weight_s[0] / ours_s, weight_s[1] * 1e3, weight_s[1] / ours_s, bare_s * 1e3);
        weight_output_lines.push_back(line);
        const double per_call[4] = {ours_s, weight_s[0], weight_s[1], bare_s};
        for (int i = 0; i < 4; ++i) block_s[i] += layer.per_block * per_call[i];
      }
    }
  }
  std::printf(
      "W vs bf16-output W (PyTorch eager's gradient type): ms per call, ratio = bare cuBLASLt "
      "time / ours (below 1: ours slower)\n"
      "  ours fp32 += : GemmContext::BackwardWeight, fp32 dw, beta 1 (reads and adds the "
      "accumulator)\n"
      "  bf16 =       : bare cuBLASLt D = dy^T x, bf16 D, beta 0, fp32 compute (bf16 gradients)\n"
      "  fp32 =       : bare cuBLASLt, fp32 D, beta 0 (first micro-batch: fp32 output, no "
      "accumulator read)\n"
      "  fp32 +=      : bare cuBLASLt, fp32 D, beta 1 (the W baseline above)\n");
  for (const std::string& line : weight_output_lines) std::printf("%s\n", line.c_str());
  std::printf(
      "W  block (4 x wq/wk/wv/wo, 2 x w1/w3, 1 x w2)  ours fp32 += %.4f ms  bf16 = %.4f ms "
      "(ratio %.3f)  fp32 = %.4f ms (ratio %.3f)  fp32 += %.4f ms\n",
      block_s[0] * 1e3, block_s[1] * 1e3, block_s[1] / block_s[0], block_s[2] * 1e3,
      block_s[2] / block_s[0], block_s[3] * 1e3);
  std::fflush(stdout);
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
