// Flash attention's time per call (kernels/cuda/attention.h) at the Llama-7B block's shape:
// batch 1, seq 2048, 32 heads, head_dim 128, bf16 storage, causal (the baseline), then the same
// with Llama 3's grouped-query attention (8 key/value heads) and with Mistral's sliding window
// (1024), each as a ratio of the baseline's time. Forward and backward (the backward includes its
// delta = rowsum(dout * o) pass) are each timed with CUDA events around `iters` back-to-back calls
// after `warmup` calls, best of three rounds.
//
// TFLOP/s counts the useful causal work the way FlashAttention's benchmarks do: forward
// 4 * batch * heads * seq^2 * head_dim / 2 (two matmuls, half masked), backward 2.5 times that
// (five matmuls). Our backward recomputes scores in two kernels (seven matmuls' worth); that
// extra work is not counted. The PyTorch comparison is a separate script.
//
// Run with `bazel run -c opt //kernels/cuda:attention_bench [-- --warmup N --iters N]`. Without
// a GPU it prints "no CUDA device: ..." and exits 0; any other failure exits 1.
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
#include "kernels/cpu/attention.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/device.h"

namespace pipecoord::kernels::cuda {
namespace {

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
  __nv_bfloat16* bf16() const { return static_cast<__nv_bfloat16*>(ptr_); }
  float* f32() const { return static_cast<float*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

// Values uniform in [-range, range) as bf16 (a fixed LCG).
Status FillBf16(void* device, int64_t count, uint32_t seed, float range) {
  std::vector<uint16_t> host(static_cast<size_t>(count));
  uint32_t state = seed;
  for (uint16_t& h : host) {
    state = state * 1664525u + 1013904223u;
    h = FloatToBf16Bits(range * (static_cast<float>(state >> 8) / 8388608.0f - 1.0f));
  }
  return CudaStatus(cudaMemcpy(device, host.data(), host.size() * 2, cudaMemcpyHostToDevice),
                    "cudaMemcpy (inputs)");
}

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

struct Times {
  double forward_s = 1e30, backward_s = 1e30;
};

// Forward and backward of shape `d`, best of three rounds of `iters` calls.
Status TimeShape(const cpu::AttentionDims& d, int warmup, int iters, cudaStream_t stream, Times* times) {
  const int64_t tokens = d.batch * d.seq * d.hidden(), kv_tokens = d.batch * d.seq * d.kv_hidden();
  const int64_t stats = d.batch * d.heads * d.seq;
  DeviceMemory q, k, v, o, dout, dq, dk, dv, lse, delta;
  for (DeviceMemory* m : {&q, &o, &dout, &dq}) PIPECOORD_RETURN_IF_ERROR(m->Allocate(tokens * 2));
  for (DeviceMemory* m : {&k, &v, &dk, &dv}) PIPECOORD_RETURN_IF_ERROR(m->Allocate(kv_tokens * 2));
  PIPECOORD_RETURN_IF_ERROR(lse.Allocate(stats * 4));
  PIPECOORD_RETURN_IF_ERROR(delta.Allocate(stats * 4));
  PIPECOORD_RETURN_IF_ERROR(FillBf16(q.get(), tokens, 1, 2.0f));
  PIPECOORD_RETURN_IF_ERROR(FillBf16(k.get(), kv_tokens, 2, 2.0f));
  PIPECOORD_RETURN_IF_ERROR(FillBf16(v.get(), kv_tokens, 3, 1.0f));
  PIPECOORD_RETURN_IF_ERROR(FillBf16(dout.get(), tokens, 4, 1.0f));

  auto forward = [&] {
    return FlashAttentionForward(q.bf16(), k.bf16(), v.bf16(), o.bf16(), lse.f32(), d, stream);
  };
  auto backward = [&] {
    return FlashAttentionBackward(dout.bf16(), q.bf16(), k.bf16(), v.bf16(), o.bf16(), lse.f32(),
                                  delta.f32(), dq.bf16(), dk.bf16(), dv.bf16(), d, stream);
  };
  PIPECOORD_RETURN_IF_ERROR(forward());  // o and lse for the backward
  for (int round = 0; round < 3; ++round) {
    double s = 0;
    PIPECOORD_RETURN_IF_ERROR(TimeCalls(forward, warmup, iters, stream, &s));
    times->forward_s = std::min(times->forward_s, s);
    PIPECOORD_RETURN_IF_ERROR(TimeCalls(backward, warmup, iters, stream, &s));
    times->backward_s = std::min(times->backward_s, s);
  }
  return Status::Ok();
}

// The causal pairs (i, j) a shape's attention computes: seq (seq + 1) / 2, or with a window w
// sum over i of min(i + 1, w).
double VisiblePairs(const cpu::AttentionDims& d) {
  double pairs = 0;
  for (int64_t i = 0; i < d.seq; ++i) pairs += static_cast<double>(i - d.first_key(i) + 1);
  return pairs;
}

Status RunBench(int warmup, int iters) {
  // The Llama-7B block's attention (the baseline), Llama 3 8B's grouped-query shape (8 key/value
  // heads for 32) and Mistral's sliding window (1024 of the 2048 positions), each timed in this
  // process and compared with the baseline.
  cpu::AttentionDims mha;
  mha.batch = 1;
  mha.seq = 2048;
  mha.heads = 32;
  mha.head_dim = 128;
  cpu::AttentionDims gqa = mha;
  gqa.kv_heads = 8;
  cpu::AttentionDims windowed = mha;
  windowed.window = 1024;
  struct Shape {
    const char* name;
    cpu::AttentionDims d;
  };
  const Shape shapes[] = {{"multi-head (the baseline)", mha}, {"grouped-query, 8 kv heads", gqa},
                          {"sliding window 1024", windowed}};

  PIPECOORD_CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  PIPECOORD_CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream));
  std::printf("flash attention, causal, bf16: batch %lld seq %lld heads %lld head_dim %lld; "
              "%d calls after %d warm-up, best of 3 rounds\n",
              static_cast<long long>(mha.batch), static_cast<long long>(mha.seq),
              static_cast<long long>(mha.heads), static_cast<long long>(mha.head_dim), iters, warmup);
  Times base;
  for (const Shape& shape : shapes) {
    Times t;
    Status st = TimeShape(shape.d, warmup, iters, stream, &t);
    if (!st.ok()) {
      cudaStreamDestroy(stream);
      return st;
    }
    if (&shape == &shapes[0]) base = t;
    // Useful work as FlashAttention's benchmarks count it: 4 b a d per visible pair forward (two
    // matmuls), 2.5 times that backward (five matmuls; our backward's recomputation not counted).
    const double forward_flops = 4.0 * shape.d.batch * shape.d.heads * shape.d.head_dim * VisiblePairs(shape.d);
    const double backward_flops = 2.5 * forward_flops;
    if (&shape == &shapes[0]) {  // the lines tools/block_vs_torch.py reads (the baseline's)
      std::printf("forward   %9.3f ms/call  %7.2f TFLOP/s\n", t.forward_s * 1e3, forward_flops / t.forward_s * 1e-12);
      std::printf("backward  %9.3f ms/call  %7.2f TFLOP/s (2.5x forward's FLOPs)\n", t.backward_s * 1e3,
                  backward_flops / t.backward_s * 1e-12);
      continue;
    }
    std::printf("%s: forward %.3f ms/call %.2f TFLOP/s (%.2fx the baseline's time), backward %.3f ms/call "
                "%.2f TFLOP/s (%.2fx)\n",
                shape.name, t.forward_s * 1e3, forward_flops / t.forward_s * 1e-12, t.forward_s / base.forward_s,
                t.backward_s * 1e3, backward_flops / t.backward_s * 1e-12, t.backward_s / base.backward_s);
  }
  PIPECOORD_CUDA_RETURN_IF_ERROR(cudaStreamDestroy(stream));
  return Status::Ok();
}

}  // namespace
}  // namespace pipecoord::kernels::cuda

int main(int argc, char** argv) {
  int warmup = 3, iters = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--warmup") == 0) warmup = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::atoi(argv[i + 1]);
  }
  if (warmup < 0 || iters < 1) {
    std::fprintf(stderr, "usage: attention_bench [--warmup N] [--iters N>=1]\n");
    return 2;
  }
  auto devices = pipecoord::kernels::QueryDevices();
  if (!devices.ok()) {
    if (devices.status().code() == pipecoord::Code::kUnavailable) {
      std::printf("%s\n", devices.status().message().c_str());  // "no CUDA device: ..."
      return 0;
    }
    std::fprintf(stderr, "attention_bench: %s\n", devices.status().ToString().c_str());
    return 1;
  }
  std::printf("device 0: %s\n", (*devices)[0].name.c_str());
  const pipecoord::Status st = pipecoord::kernels::cuda::RunBench(warmup, iters);
  if (!st.ok()) {
    std::fprintf(stderr, "attention_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
