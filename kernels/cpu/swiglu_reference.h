// The reference SwiGLU gate: the same F and B as swiglu.h, each output computed in double from
// the inputs and rounded to T once. What the fp32 gate ran before it moved to float vector code
// (swiglu.h), what the tests compare that path with, and what T = double (finite-difference
// tests) and PIPECOORD_CPU_GEMM=reference run. Same contracts as swiglu.h.
#ifndef PIPECOORD_KERNELS_CPU_SWIGLU_REFERENCE_H_
#define PIPECOORD_KERNELS_CPU_SWIGLU_REFERENCE_H_

#include <cstdint>

namespace pipecoord::kernels::cpu {

template <typename T>
void SwiGluForwardReference(const T* gate, const T* up, T* z, int64_t n);

template <typename T>
void SwiGluBackwardReference(const T* dz, const T* gate, const T* up, T* dgate, T* dup, int64_t n);

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_SWIGLU_REFERENCE_H_
