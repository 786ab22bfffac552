// Rotary position embedding on the GPU: the twin of kernels/cpu/rotary.h (Llama's interleaved
// RoPE: within each head the pair (x[2i], x[2i+1]) turns by pos * base^(-2i / head_dim), pos
// being the token's position inside its sequence).
//
// Layout: x, y [batch, seq, heads, head_dim] row-major in T (float or bf16), head_dim even. The
// table lives on the device as double cos and sin [seq, head_dim / 2], as the CPU table does:
// angles reach thousands of radians, far past what float keeps. The rotation runs in double and
// rounds once to T. All pointers are device pointers; y may equal x (in place, as on the CPU).
#ifndef PIPECOORD_KERNELS_CUDA_ROTARY_H_
#define PIPECOORD_KERNELS_CUDA_ROTARY_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/status.h"
#include "kernels/cuda/bf16.h"

namespace pipecoord::kernels::cuda {

// Device buffers of a table built by BuildRopeTable (or copied from cpu::MakeRopeTable's).
struct DeviceRopeTable {
  const double* cos = nullptr;  // [seq, head_dim / 2]
  const double* sin = nullptr;  // [seq, head_dim / 2]
  int64_t seq = 0;
  int64_t head_dim = 0;
};

// Fills cos and sin (device, seq * head_dim / 2 doubles each) for positions [0, seq), computed
// in double on the device as cpu::MakeRopeTable computes them. head_dim even and >= 2.
Status BuildRopeTable(double* cos, double* sin, int64_t seq, int64_t head_dim, double base,
                      cudaStream_t stream);

// F: y = every pair of x rotated by its angle.
Status RopeForward(const float* x, float* y, const DeviceRopeTable& table, int64_t batch,
                   int64_t heads, cudaStream_t stream);
Status RopeForward(const __nv_bfloat16* x, __nv_bfloat16* y, const DeviceRopeTable& table,
                   int64_t batch, int64_t heads, cudaStream_t stream);

// B: dx = R^T dy, every pair rotated by minus its angle. RoPE has no weights (no W part).
Status RopeBackward(const float* dy, float* dx, const DeviceRopeTable& table, int64_t batch,
                    int64_t heads, cudaStream_t stream);
Status RopeBackward(const __nv_bfloat16* dy, __nv_bfloat16* dx, const DeviceRopeTable& table,
                    int64_t batch, int64_t heads, cudaStream_t stream);

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_ROTARY_H_
