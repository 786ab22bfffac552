// Flash attention's launchers: argument checks, shared-memory opt-in, grids and launch checks.
// The kernels are in attention_kernels.h (float) and attention_tensor_core_kernels.h (bf16).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/attention_mma_kernels.h"
#include "kernels/cuda/attention_tensor_core_kernels.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.h"

namespace pipecoord::kernels::cuda {
namespace {

using namespace flash;  // NOLINT: the kernels and their tile constants

// Lets `kernel` use `bytes` of dynamic shared memory (above the 48 KiB default), or says why not.
template <typename Kernel>
Status AllowSharedMemory(Kernel* kernel, int bytes, const char* name) {
  int device = 0;
  PIPECOORD_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  int limit = 0;
  PIPECOORD_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > limit) {
    return FailedPrecondition(std::string(name) + " needs " + std::to_string(bytes) +
                              " bytes of shared memory per block; device " +
                              std::to_string(device) + " allows " + std::to_string(limit));
  }
  return CudaStatus(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
      std::string("cudaFuncSetAttribute(MaxDynamicSharedMemorySize) for ") + name);
}

// The kernels' sliding window: 0 (plain causal) unless it is shorter than the sequence.
int WindowOf(const cpu::AttentionDims& d) {
  return d.window > 0 && d.window < d.seq ? static_cast<int>(d.window) : 0;
}

float ScaleOf(const cpu::AttentionDims& d) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.head_dim)));
}

// float storage runs the fp32 kernels of attention_kernels.h; bf16 the tensor-core kernels of
// attention_tensor_core_kernels.h.
template <typename T>
constexpr bool kUsesTensorCores = std::is_same_v<T, __nv_bfloat16>;

// bf16 takes the register-level kernels of attention_mma_kernels.h when their 16-byte copies
// line up: head_dim a multiple of 8 (so are the rows and every head's offset) and every tensor
// 16-byte aligned. Other shapes keep the WMMA kernels.
bool TakesMmaKernels(const cpu::AttentionDims& d, std::initializer_list<const void*> tensors) {
  if (d.head_dim % 8 != 0) return false;
  for (const void* p : tensors) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

template <typename T, int kD>
Status LaunchForward(const T* q, const T* k, const T* v, T* o, float* lse,
                     const cpu::AttentionDims& d, cudaStream_t stream) {
  const dim3 grid(Tiles(d.seq, kForwardRows), static_cast<unsigned>(d.heads),
                  static_cast<unsigned>(d.batch));
  const int seq = static_cast<int>(d.seq);
  const int heads = static_cast<int>(d.heads);
  const int kv_heads = static_cast<int>(d.kv());
  const int window = WindowOf(d);
  const int head_dim = static_cast<int>(d.head_dim);
  const float scale_log2 = ScaleOf(d) * kLog2e;
  if constexpr (kUsesTensorCores<T>) {
    if (TakesMmaKernels(d, {q, k, v, o})) {
      constexpr int kMTiles = flash_mma::kForwardMTiles;
      constexpr int kBytes = flash_mma::ForwardSharedBytes<kD, kMTiles>();
      PIPECOORD_RETURN_IF_ERROR(AllowSharedMemory(flash_mma::FlashForwardMmaKernel<kD, kMTiles>,
                                                  kBytes, "FlashForwardMmaKernel"));
      const dim3 mma_grid(Tiles(d.seq, flash_mma::ForwardRows<kMTiles>()),
                          static_cast<unsigned>(d.heads), static_cast<unsigned>(d.batch));
      flash_mma::FlashForwardMmaKernel<kD, kMTiles>
          <<<mma_grid, flash_mma::kThreads, kBytes, stream>>>(q, k, v, o, lse, seq, heads, kv_heads,
                                                              head_dim, window, scale_log2);
      return LaunchStatus("FlashForwardMmaKernel");
    }
    constexpr int kBytes = ForwardTensorCoreLayout<kD>::kBytes;
    PIPECOORD_RETURN_IF_ERROR(AllowSharedMemory(FlashForwardTensorCoreKernel<kD>, kBytes,
                                                "FlashForwardTensorCoreKernel"));
    FlashForwardTensorCoreKernel<kD>
        <<<grid, kThreads, kBytes, stream>>>(q, k, v, o, lse, seq, heads, kv_heads, head_dim, window,
                                             scale_log2);
    return LaunchStatus("FlashForwardTensorCoreKernel");
  } else {
    constexpr int kBytes = ForwardSmemFloats<kD>() * static_cast<int>(sizeof(float));
    PIPECOORD_RETURN_IF_ERROR(
        AllowSharedMemory(FlashForwardKernel<T, kD>, kBytes, "FlashForwardKernel"));
    FlashForwardKernel<T, kD>
        <<<grid, kThreads, kBytes, stream>>>(q, k, v, o, lse, seq, heads, kv_heads, head_dim, window,
                                             scale_log2);
    return LaunchStatus("FlashForwardKernel");
  }
}

template <typename T, int kD>
Status LaunchBackward(const T* dout, const T* q, const T* k, const T* v, const float* lse,
                      const float* delta, T* dq, T* dk, T* dv, const cpu::AttentionDims& d,
                      cudaStream_t stream) {
  const int seq = static_cast<int>(d.seq);
  const int heads = static_cast<int>(d.heads);
  const int kv_heads = static_cast<int>(d.kv());
  const int window = WindowOf(d);
  const int head_dim = static_cast<int>(d.head_dim);
  const float scale = ScaleOf(d);
  // dk and dv: a block per key tile and key/value head (it sums the group's query heads).
  const dim3 key_grid(Tiles(d.seq, kKeyTile), static_cast<unsigned>(d.kv()),
                      static_cast<unsigned>(d.batch));
  const dim3 query_grid(Tiles(d.seq, kBackwardRows), static_cast<unsigned>(d.heads),
                        static_cast<unsigned>(d.batch));
  if constexpr (kUsesTensorCores<T>) {
    if (TakesMmaKernels(d, {dout, q, k, v, dq, dk, dv})) {
      constexpr int kKeyValueBytes = flash_mma::KeyValueSharedBytes<kD>();
      PIPECOORD_RETURN_IF_ERROR(AllowSharedMemory(flash_mma::FlashBackwardKeyValueMmaKernel<kD>,
                                                  kKeyValueBytes,
                                                  "FlashBackwardKeyValueMmaKernel"));
      const dim3 mma_key_grid(Tiles(d.seq, flash_mma::kKeys), static_cast<unsigned>(d.kv()),
                              static_cast<unsigned>(d.batch));
      flash_mma::FlashBackwardKeyValueMmaKernel<kD>
          <<<mma_key_grid, flash_mma::kThreads, kKeyValueBytes, stream>>>(
              dout, q, k, v, lse, delta, dk, dv, seq, heads, kv_heads, head_dim, window, scale, scale * kLog2e);
      PIPECOORD_RETURN_IF_ERROR(LaunchStatus("FlashBackwardKeyValueMmaKernel"));

      constexpr int kQueryBytes = flash_mma::QuerySharedBytes<kD>();
      PIPECOORD_RETURN_IF_ERROR(AllowSharedMemory(flash_mma::FlashBackwardQueryMmaKernel<kD>,
                                                  kQueryBytes, "FlashBackwardQueryMmaKernel"));
      const dim3 mma_query_grid(Tiles(d.seq, flash_mma::kRows), static_cast<unsigned>(d.heads),
                                static_cast<unsigned>(d.batch));
      flash_mma::FlashBackwardQueryMmaKernel<kD>
          <<<mma_query_grid, flash_mma::kThreads, kQueryBytes, stream>>>(
              dout, q, k, v, lse, delta, dq, seq, heads, kv_heads, head_dim, window, scale, scale * kLog2e);
      return LaunchStatus("FlashBackwardQueryMmaKernel");
    }
    constexpr int kKeyValueBytes = KeyValueTensorCoreLayout<kD>::kBytes;
    PIPECOORD_RETURN_IF_ERROR(AllowSharedMemory(FlashBackwardKeyValueTensorCoreKernel<kD>,
                                                kKeyValueBytes,
                                                "FlashBackwardKeyValueTensorCoreKernel"));
    FlashBackwardKeyValueTensorCoreKernel<kD><<<key_grid, kThreads, kKeyValueBytes, stream>>>(
        dout, q, k, v, lse, delta, dk, dv, seq, heads, kv_heads, head_dim, window, scale, scale * kLog2e);
    PIPECOORD_RETURN_IF_ERROR(LaunchStatus("FlashBackwardKeyValueTensorCoreKernel"));

    constexpr int kQueryBytes = QueryTensorCoreLayout<kD>::kBytes;
    PIPECOORD_RETURN_IF_ERROR(AllowSharedMemory(FlashBackwardQueryTensorCoreKernel<kD>, kQueryBytes,
                                                "FlashBackwardQueryTensorCoreKernel"));
    FlashBackwardQueryTensorCoreKernel<kD><<<query_grid, kThreads, kQueryBytes, stream>>>(
        dout, q, k, v, lse, delta, dq, seq, heads, kv_heads, head_dim, window, scale, scale * kLog2e);
    return LaunchStatus("FlashBackwardQueryTensorCoreKernel");
  } else {
    constexpr int kKeyValueBytes = KeyValueSmemFloats<kD>() * static_cast<int>(sizeof(float));
    PIPECOORD_RETURN_IF_ERROR(AllowSharedMemory(FlashBackwardKeyValueKernel<T, kD>, kKeyValueBytes,
                                                "FlashBackwardKeyValueKernel"));
    FlashBackwardKeyValueKernel<T, kD><<<key_grid, kThreads, kKeyValueBytes, stream>>>(
        dout, q, k, v, lse, delta, dk, dv, seq, heads, kv_heads, head_dim, window, scale, scale * kLog2e);
    PIPECOORD_RETURN_IF_ERROR(LaunchStatus("FlashBackwardKeyValueKernel"));

    constexpr int kQueryBytes = QuerySmemFloats<kD>() * static_cast<int>(sizeof(float));
    PIPECOORD_RETURN_IF_ERROR(AllowSharedMemory(FlashBackwardQueryKernel<T, kD>, kQueryBytes,
                                                "FlashBackwardQueryKernel"));
    FlashBackwardQueryKernel<T, kD><<<query_grid, kThreads, kQueryBytes, stream>>>(
        dout, q, k, v, lse, delta, dq, seq, heads, kv_heads, head_dim, window, scale, scale * kLog2e);
    return LaunchStatus("FlashBackwardQueryKernel");
  }
}

template <typename T>
Status Forward(const T* q, const T* k, const T* v, T* o, float* lse, const cpu::AttentionDims& d,
               cudaStream_t stream) {
  PIPECOORD_RETURN_IF_ERROR(CheckFlashAttentionDims(d));
  constexpr const char* kName = "FlashAttentionForward";
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kName, "q", q));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kName, "k", k));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kName, "v", v));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kName, "o", o));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kName, "lse", lse));
  switch (PaddedHeadDim(d.head_dim)) {
    case 32:
      return LaunchForward<T, 32>(q, k, v, o, lse, d, stream);
    case 64:
      return LaunchForward<T, 64>(q, k, v, o, lse, d, stream);
    default:
      return LaunchForward<T, 128>(q, k, v, o, lse, d, stream);
  }
}

template <typename T>
Status Backward(const T* dout, const T* q, const T* k, const T* v, const T* o, const float* lse,
                float* delta, T* dq, T* dk, T* dv, const cpu::AttentionDims& d,
                cudaStream_t stream) {
  PIPECOORD_RETURN_IF_ERROR(CheckFlashAttentionDims(d));
  constexpr const char* kName = "FlashAttentionBackward";
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kName, "dout", dout));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kName, "q", q));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kName, "k", k));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kName, "v", v));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kName, "o", o));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kName, "lse", lse));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kName, "delta", delta));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kName, "dq", dq));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kName, "dk", dk));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kName, "dv", dv));

  const int64_t rows = d.batch * d.seq * d.heads;
  // A warp per row; GridBlocks caps the grid (the kernel strides over the rest), so the count
  // it is given only needs to reach the cap without overflowing.
  const int64_t row_threads = std::min<int64_t>(rows, int64_t{1} << 24) * 32;
  RowDotKernel<T><<<device::GridBlocks(row_threads, kThreads), kThreads, 0, stream>>>(
      dout, o, delta, rows, static_cast<int>(d.seq), static_cast<int>(d.heads),
      static_cast<int>(d.head_dim));
  PIPECOORD_RETURN_IF_ERROR(LaunchStatus("RowDotKernel"));

  switch (PaddedHeadDim(d.head_dim)) {
    case 32:
      return LaunchBackward<T, 32>(dout, q, k, v, lse, delta, dq, dk, dv, d, stream);
    case 64:
      return LaunchBackward<T, 64>(dout, q, k, v, lse, delta, dq, dk, dv, d, stream);
    default:
      return LaunchBackward<T, 128>(dout, q, k, v, lse, delta, dq, dk, dv, d, stream);
  }
}

}  // namespace

Status FlashAttentionForward(const float* q, const float* k, const float* v, float* o, float* lse,
                             const cpu::AttentionDims& d, cudaStream_t stream) {
  return Forward(q, k, v, o, lse, d, stream);
}

Status FlashAttentionForward(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                             __nv_bfloat16* o, float* lse, const cpu::AttentionDims& d,
                             cudaStream_t stream) {
  return Forward(q, k, v, o, lse, d, stream);
}

Status FlashAttentionBackward(const float* dout, const float* q, const float* k, const float* v,
                              const float* o, const float* lse, float* delta, float* dq, float* dk,
                              float* dv, const cpu::AttentionDims& d, cudaStream_t stream) {
  return Backward(dout, q, k, v, o, lse, delta, dq, dk, dv, d, stream);
}

Status FlashAttentionBackward(const __nv_bfloat16* dout, const __nv_bfloat16* q,
                              const __nv_bfloat16* k, const __nv_bfloat16* v,
                              const __nv_bfloat16* o, const float* lse, float* delta,
                              __nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv,
                              const cpu::AttentionDims& d, cudaStream_t stream) {
  return Backward(dout, q, k, v, o, lse, delta, dq, dk, dv, d, stream);
}

}  // namespace pipecoord::kernels::cuda
