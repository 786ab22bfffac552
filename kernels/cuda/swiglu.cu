// SwiGLU kernels: elementwise, grid-stride.
#include "kernels/cuda/swiglu.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.h"

namespace pipecoord::kernels::cuda {
namespace {

using device::FromFloat;
using device::GlobalThread;
using device::GridBlocks;
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

template <typename T>
Status Forward(const T* gate, const T* up, T* z, int64_t n, cudaStream_t stream) {
  constexpr const char* kFn = "SwiGluForward";
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "n", n, int64_t{1} << 50));
  if (n == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "gate", gate));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "up", up));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "z", z));
  SwiGluForwardKernel<T><<<GridBlocks(n, kThreads), kThreads, 0, stream>>>(gate, up, z, n);
  return LaunchStatus("SwiGluForwardKernel");
}

template <typename T>
Status Backward(const T* dz, const T* gate, const T* up, T* dgate, T* dup, int64_t n,
                cudaStream_t stream) {
  constexpr const char* kFn = "SwiGluBackward";
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "n", n, int64_t{1} << 50));
  if (n == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "dz", dz));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "gate", gate));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "up", up));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "dgate", dgate));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "dup", dup));
  SwiGluBackwardKernel<T>
      <<<GridBlocks(n, kThreads), kThreads, 0, stream>>>(dz, gate, up, dgate, dup, n);
  return LaunchStatus("SwiGluBackwardKernel");
}

}  // namespace

Status SwiGluForward(const float* gate, const float* up, float* z, int64_t n,
                     cudaStream_t stream) {
  return Forward(gate, up, z, n, stream);
}
Status SwiGluForward(const __nv_bfloat16* gate, const __nv_bfloat16* up, __nv_bfloat16* z,
                     int64_t n, cudaStream_t stream) {
  return Forward(gate, up, z, n, stream);
}

Status SwiGluBackward(const float* dz, const float* gate, const float* up, float* dgate,
                      float* dup, int64_t n, cudaStream_t stream) {
  return Backward(dz, gate, up, dgate, dup, n, stream);
}
Status SwiGluBackward(const __nv_bfloat16* dz, const __nv_bfloat16* gate,
                      const __nv_bfloat16* up, __nv_bfloat16* dgate, __nv_bfloat16* dup,
                      int64_t n, cudaStream_t stream) {
  return Backward(dz, gate, up, dgate, dup, n, stream);
}

}  // namespace pipecoord::kernels::cuda
