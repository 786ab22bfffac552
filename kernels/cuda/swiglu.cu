// SwiGLU launchers: argument checks, then the kernels of swiglu_kernels.h.
#include "kernels/cuda/swiglu.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.h"
#include "kernels/cuda/swiglu_kernels.h"

namespace pipecoord::kernels::cuda {
namespace {

using device::GridBlocks;
using swiglu::kThreads;
using swiglu::SwiGluBackwardKernel;
using swiglu::SwiGluForwardKernel;

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
