// The exact linear kernel (device code) behind exact_linear.h; exact_linear.cu launches it on a
// 2-D grid of kTile x kTile output tiles, one thread per output.
//
// nvcc builds it through exact_linear.cu; g++ builds it under cuda_emulation.h for
// exact_linear_emulated_test, which runs this very kernel on the CPU.
#ifndef PIPECOORD_KERNELS_CUDA_EXACT_LINEAR_KERNELS_H_
#define PIPECOORD_KERNELS_CUDA_EXACT_LINEAR_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/device_math.h"

namespace pipecoord::kernels::cuda::exact_linear {

constexpr int kTile = 16;

__global__ void ExactLinearKernel(const float* __restrict__ x, const float* __restrict__ w,
                                  float* __restrict__ y, int64_t n, int64_t in, int64_t out) {
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const int64_t t = static_cast<int64_t>(blockIdx.y) * kTile + threadIdx.y;
  if (o >= out || t >= n) return;
  const float* xr = x + t * in;
  const float* wr = w + o * in;
  double acc = 0.0;
  for (int64_t i = 0; i < in; ++i) acc += static_cast<double>(xr[i]) * static_cast<double>(wr[i]);
  y[t * out + o] = __double2float_rn(acc);
}

}  // namespace pipecoord::kernels::cuda::exact_linear

#endif  // PIPECOORD_KERNELS_CUDA_EXACT_LINEAR_KERNELS_H_
