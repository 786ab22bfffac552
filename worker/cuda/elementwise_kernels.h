// The elementwise kernels (device code) behind elementwise.h: grid-stride loops, math in float.
//
// nvcc builds it through elementwise.cu; g++ builds it under kernels/cuda/cuda_emulation.h for
// elementwise_emulated_test, which runs these very kernels on the CPU.
#ifndef PIPECOORD_WORKER_CUDA_ELEMENTWISE_KERNELS_H_
#define PIPECOORD_WORKER_CUDA_ELEMENTWISE_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/device_math.h"

namespace pipecoord::worker::cuda::elementwise {

using kernels::cuda::device::FromFloat;
using kernels::cuda::device::GlobalThread;
using kernels::cuda::device::GridThreads;
using kernels::cuda::device::ToFloat;

constexpr int kThreads = 256;
// The scalar kernel runs one warp (one thread works): launches always hold whole warps.
constexpr int kScalarThreads = 32;

template <typename T>
__global__ void AddInPlaceKernel(T* __restrict__ acc, const T* __restrict__ x, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    acc[i] = FromFloat<T>(ToFloat(acc[i]) + ToFloat(x[i]));
  }
}

__global__ void ScaleInPlaceKernel(float* __restrict__ x, float factor, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) x[i] = x[i] * factor;
}

__global__ void CastToBf16Kernel(const float* __restrict__ in, __nv_bfloat16* __restrict__ out,
                                 int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void CastToFloatKernel(const __nv_bfloat16* __restrict__ in, float* __restrict__ out, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) out[i] = __bfloat162float(in[i]);
}

// The global norm's sum of squares, in two launches so that it is the same bits every run
// (no atomics): each block sums its grid-stride elements' squares in double and reduces them as a
// tree; one thread then adds the blocks' sums in block order to the accumulator.
constexpr int kSumOfSquaresBlocks = 128;  // the most partial sums (the scratch's length)

__global__ void SumOfSquaresPartialKernel(const float* __restrict__ x, int64_t n, double* __restrict__ partials) {
  __shared__ double sums[kThreads];
  double s = 0;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const double v = x[i];
    s += v * v;
  }
  sums[threadIdx.x] = s;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (static_cast<int>(threadIdx.x) < width) sums[threadIdx.x] += sums[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = sums[0];
}

__global__ void AddPartialSumsKernel(const double* __restrict__ partials, int count, double* acc) {
  if (GlobalThread() != 0) return;
  double s = 0;
  for (int b = 0; b < count; ++b) s += partials[b];
  *acc += s;
}

// y[r, c] += b[c] (a projection's bias, broadcast over the token rows), in float, rounded once
// to the storage type.
template <typename T>
__global__ void AddBiasKernel(T* __restrict__ y, const T* __restrict__ b, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    y[i] = FromFloat<T>(ToFloat(y[i]) + ToFloat(b[i % cols]));
  }
}

// db[c] += dy[0, c] + dy[1, c] + ... in row order, one float addition each, the gradient of a
// bias (the CPU model's AddBiasGrad, bit for bit): a thread per column, adjacent threads reading
// adjacent columns of a row. The same bits every run (no atomics).
template <typename T>
__global__ void AddBiasGradKernel(const T* __restrict__ dy, float* __restrict__ db, int64_t rows, int64_t cols) {
  for (int64_t c = GlobalThread(); c < cols; c += GridThreads()) {
    float acc = db[c];
    for (int64_t r = 0; r < rows; ++r) acc += ToFloat(dy[r * cols + c]);
    db[c] = acc;
  }
}

template <typename V>
__global__ void AccumulateScalarKernel(double* acc, const V* value) {
  if (GlobalThread() == 0) *acc += static_cast<double>(*value);
}

}  // namespace pipecoord::worker::cuda::elementwise

#endif  // PIPECOORD_WORKER_CUDA_ELEMENTWISE_KERNELS_H_
