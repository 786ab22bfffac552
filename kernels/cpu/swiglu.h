// SwiGLU gate (Shazeer 2020): z = silu(gate) * up elementwise, silu(u) = u * sigmoid(u).
// The projections around it are linear.h's; the gate itself has no weights (no W part).
// All buffers hold n values; callers own them; none may alias another.
#ifndef PIPECOORD_KERNELS_CPU_SWIGLU_H_
#define PIPECOORD_KERNELS_CPU_SWIGLU_H_

#include <cstdint>

namespace pipecoord::kernels::cpu {

// F: overwrites z.
template <typename T>
void SwiGluForward(const T* gate, const T* up, T* z, int64_t n);

// B: dgate = dz * up * silu'(gate), dup = dz * silu(gate); overwrites both.
template <typename T>
void SwiGluBackward(const T* dz, const T* gate, const T* up, T* dgate, T* dup, int64_t n);

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_SWIGLU_H_
