// SwiGLU gate (Shazeer 2020): z = silu(gate) * up elementwise, silu(u) = u * sigmoid(u).
// The projections around it are linear.h's; the gate itself has no weights (no W part).
// All buffers hold n values; callers own them; none may alias another.
// T = float runs float vector code (vector_exp.h's exp, each output a few roundings: within 16
// units of fp32 rounding of the exact value, swiglu_test), the same bits for the same inputs
// wherever they sit in memory. T = double, and fp32 under PIPECOORD_CPU_GEMM=reference, run
// swiglu_reference.h's loops (double, rounded once).
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
