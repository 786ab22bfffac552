// The SwiGLU kernels (device code) behind swiglu.h; swiglu.cu launches them with kThreads per
// block on grid-stride loops over the elements.
//
// nvcc builds it through swiglu.cu; g++ builds it under cuda_emulation.h for
// swiglu_emulated_test, which runs these very kernels on the CPU.
#ifndef PIPECOORD_KERNELS_CUDA_SWIGLU_KERNELS_H_
#define PIPECOORD_KERNELS_CUDA_SWIGLU_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/device_math.h"

namespace pipecoord::kernels::cuda::swiglu {

using device::FromFloat;
using device::GlobalThread;
using device::GridThreads;
using device::ToFloat;

constexpr int kThreads = 256;

// sigmoid(u) and 1 - sigmoid(u) = sigmoid(-u) from one exp(-|u|), which lies in (0, 1]: no
// overflow for any u, and the smaller of the two never comes from a subtraction.
struct Sigmoids {
  float of_u;        // sigmoid(u)
  float of_minus_u;  // 1 - sigmoid(u)
};

__device__ __forceinline__ Sigmoids SigmoidsOf(float u) {
  const float e = expf(-fabsf(u));
  const float inv = 1.0f / (1.0f + e);
  return u >= 0.0f ? Sigmoids{inv, e * inv} : Sigmoids{e * inv, inv};
}

template <typename T>
__global__ void SwiGluForwardKernel(const T* __restrict__ gate, const T* __restrict__ up,
                                    T* __restrict__ z, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const float u = ToFloat(gate[i]);
    z[i] = FromFloat<T>(u * SigmoidsOf(u).of_u * ToFloat(up[i]));
  }
}

// silu'(u) = sg (1 + u (1 - sg)); the bracket is one fused multiply-add.
template <typename T>
__global__ void SwiGluBackwardKernel(const T* __restrict__ dz, const T* __restrict__ gate,
                                     const T* __restrict__ up, T* __restrict__ dgate,
                                     T* __restrict__ dup, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const float u = ToFloat(gate[i]);
    const float g = ToFloat(dz[i]);
    const Sigmoids s = SigmoidsOf(u);
    dgate[i] = FromFloat<T>(g * ToFloat(up[i]) * s.of_u * fmaf(u, s.of_minus_u, 1.0f));
    dup[i] = FromFloat<T>(g * u * s.of_u);
  }
}

}  // namespace pipecoord::kernels::cuda::swiglu

#endif  // PIPECOORD_KERNELS_CUDA_SWIGLU_KERNELS_H_
