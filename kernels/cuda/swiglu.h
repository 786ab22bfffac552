// SwiGLU gate on the GPU: the twin of kernels/cpu/swiglu.h, z = silu(gate) * up elementwise,
// silu(u) = u * sigmoid(u). No weights (no W part).
//
// All buffers hold n values of T (float or bf16) in device memory; none may alias another.
// Math in float (one exp per element; sigmoid(u) and 1 - sigmoid(u) both from exp(-|u|), so
// neither overflows nor cancels), rounded once to T.
#ifndef PIPECOORD_KERNELS_CUDA_SWIGLU_H_
#define PIPECOORD_KERNELS_CUDA_SWIGLU_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/status.h"
#include "kernels/cuda/bf16.h"

namespace pipecoord::kernels::cuda {

// F: overwrites z.
Status SwiGluForward(const float* gate, const float* up, float* z, int64_t n,
                     cudaStream_t stream);
Status SwiGluForward(const __nv_bfloat16* gate, const __nv_bfloat16* up, __nv_bfloat16* z,
                     int64_t n, cudaStream_t stream);

// B: dgate = dz * up * silu'(gate), dup = dz * silu(gate); overwrites both.
Status SwiGluBackward(const float* dz, const float* gate, const float* up, float* dgate,
                      float* dup, int64_t n, cudaStream_t stream);
Status SwiGluBackward(const __nv_bfloat16* dz, const __nv_bfloat16* gate,
                      const __nv_bfloat16* up, __nv_bfloat16* dgate, __nv_bfloat16* dup,
                      int64_t n, cudaStream_t stream);

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_SWIGLU_H_
