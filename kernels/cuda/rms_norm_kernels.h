// The RMSNorm kernels (device code) behind rms_norm.h; rms_norm.cu launches them: one block of
// kRowThreads per row for F and B, and for W blocks of kStripColumns x kStripRows threads, each
// owning kStripColumns adjacent columns.
//
// nvcc builds it through rms_norm.cu; g++ builds it under cuda_emulation.h for
// rms_norm_emulated_test, which runs these very kernels on the CPU.
#ifndef PIPECOORD_KERNELS_CUDA_RMS_NORM_KERNELS_H_
#define PIPECOORD_KERNELS_CUDA_RMS_NORM_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/device_math.h"

namespace pipecoord::kernels::cuda::rms_norm {

using device::BlockSum;
using device::FromDouble;
using device::ToFloat;

// Threads per row block. Fixed, so a row's sum order (and its bits) never depend on h or n.
constexpr int kRowThreads = 256;

// W: a block owns kStripColumns adjacent columns; its kStripRows thread rows walk the n rows.
constexpr int kStripColumns = 32;
constexpr int kStripRows = 32;

template <typename T>
__global__ void RmsNormForwardKernel(const T* __restrict__ x, const T* __restrict__ g,
                                     T* __restrict__ y, float* __restrict__ rstd, int64_t h,
                                     double eps) {
  __shared__ double scratch[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * h;
  double ss = 0;
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    const double v = ToFloat(xr[i]);
    ss += v * v;  // the square of a float is exact in double
  }
  ss = BlockSum(ss, scratch);
  const float r = __double2float_rn(1.0 / sqrt(ss / static_cast<double>(h) + eps));
  if (threadIdx.x == 0) rstd[row] = r;
  const double rd = r;
  T* yr = y + row * h;
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    yr[i] = FromDouble<T>(static_cast<double>(ToFloat(xr[i])) * rd * ToFloat(g[i]));
  }
}

template <typename T>
__global__ void RmsNormBackwardInputKernel(const T* __restrict__ dy, const T* __restrict__ x,
                                           const T* __restrict__ g,
                                           const float* __restrict__ rstd, T* __restrict__ dx,
                                           int64_t h, bool accumulate) {
  __shared__ double scratch[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * h;
  const T* dyr = dy + row * h;
  double dot = 0;  // sum_i g_i dy_i x_i
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    dot += static_cast<double>(ToFloat(g[i])) * ToFloat(dyr[i]) * ToFloat(xr[i]);
  }
  dot = BlockSum(dot, scratch);
  const double r = rstd[row];
  const double c = r * r * r * dot / static_cast<double>(h);
  T* dxr = dx + row * h;
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    const double v = r * ToFloat(g[i]) * ToFloat(dyr[i]) - c * ToFloat(xr[i]);
    dxr[i] = FromDouble<T>(accumulate ? ToFloat(dxr[i]) + v : v);
  }
}

// Block (kStripColumns, kStripRows): thread (tx, ty) sums rows ty, ty + kStripRows, ... of
// column 32 * blockIdx.x + tx; the kStripRows partial sums are then added in ty order.
template <typename T>
__global__ void RmsNormBackwardWeightKernel(const T* __restrict__ dy, const T* __restrict__ x,
                                            const float* __restrict__ rstd,
                                            float* __restrict__ dg, int64_t n, int64_t h) {
  __shared__ double partial[kStripRows][kStripColumns + 1];  // +1: no bank conflicts below
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kStripColumns + tx;
  double acc = 0;
  if (col < h) {
    for (int64_t t = ty; t < n; t += kStripRows) {
      acc += static_cast<double>(ToFloat(dy[t * h + col])) * ToFloat(x[t * h + col]) *
             static_cast<double>(rstd[t]);
    }
  }
  partial[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && col < h) {
    double sum = dg[col];
    for (int k = 0; k < kStripRows; ++k) sum += partial[k][tx];
    dg[col] = __double2float_rn(sum);
  }
}

}  // namespace pipecoord::kernels::cuda::rms_norm

#endif  // PIPECOORD_KERNELS_CUDA_RMS_NORM_KERNELS_H_
