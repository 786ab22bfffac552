// Device-side helpers shared by the .cu files of kernels/cuda: element loads and stores for the
// two activation dtypes, and block-wide sums whose order is fixed by the launch shape alone, so a
// kernel using them gives the same bits on every run. nvcc builds it; so does g++ under the CPU
// emulation of cuda_emulation.h (the *_emulated_test files), which defines the CUDA built-ins
// used here first.
#ifndef PIPECOORD_KERNELS_CUDA_DEVICE_MATH_H_
#define PIPECOORD_KERNELS_CUDA_DEVICE_MATH_H_

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#elif !defined(PIPECOORD_CUDA_EMULATION)
#error "kernels/cuda/device_math.h is device code: nvcc, or cuda_emulation.h's CPU emulation"
#endif

#include <cstdint>

namespace pipecoord::kernels::cuda::device {

// Activations are stored as float or bf16; arithmetic never runs in bf16.
__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

// Round to the storage type, to nearest even: from float ...
template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// ... and from double, rounded once (not through float) as the CPU twin rounds once.
template <typename T>
__device__ __forceinline__ T FromDouble(double v);
template <>
__device__ __forceinline__ float FromDouble<float>(double v) {
  return __double2float_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromDouble<__nv_bfloat16>(double v) {
  return __double2bfloat16(v);
}

// Sum over the warp; lane 0 holds the total (the others partial sums). Fixed shuffle order.
template <typename V>
__device__ __forceinline__ V WarpSum(V v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

template <typename V>
__device__ __forceinline__ V WarpMax(V v) {
  for (int offset = 16; offset > 0; offset /= 2) v = max(v, __shfl_down_sync(0xffffffffu, v, offset));
  return v;
}

// Block-wide sum or max for a 1-D block whose size is a multiple of 32 (at most 1024). Every
// thread must call it; every thread gets the result. `scratch` holds 32 values and may be
// reused right after the call returns (it ends with a barrier).
template <typename V>
__device__ V BlockSum(V v, V* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  v = WarpSum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    V w = lane < warps ? scratch[lane] : V(0);
    w = WarpSum(w);
    if (lane == 0) scratch[0] = w;
  }
  __syncthreads();
  const V total = scratch[0];
  __syncthreads();
  return total;
}

template <typename V>
__device__ V BlockMax(V v, V* scratch, V lowest) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  v = WarpMax(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    V w = lane < warps ? scratch[lane] : lowest;
    w = WarpMax(w);
    if (lane == 0) scratch[0] = w;
  }
  __syncthreads();
  const V total = scratch[0];
  __syncthreads();
  return total;
}

// Blocks for a grid-stride loop over `items` with `threads` per block: enough to fill the GPU,
// capped so the grid stays far below CUDA's limits (the loop covers the rest). At least 1.
inline unsigned GridBlocks(int64_t items, int threads, int64_t cap = int64_t{1} << 16) {
  int64_t blocks = (items + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > cap) blocks = cap;
  return static_cast<unsigned>(blocks);
}

// The index of this thread in a 1-D grid, and the grid's thread count, as 64-bit values (the
// element counts of the model's tensors pass 2^31).
__device__ __forceinline__ int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace pipecoord::kernels::cuda::device

#endif  // PIPECOORD_KERNELS_CUDA_DEVICE_MATH_H_
