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

template <typename V>
__global__ void AccumulateScalarKernel(double* acc, const V* value) {
  if (GlobalThread() == 0) *acc += static_cast<double>(*value);
}

}  // namespace pipecoord::worker::cuda::elementwise

#endif  // PIPECOORD_WORKER_CUDA_ELEMENTWISE_KERNELS_H_
