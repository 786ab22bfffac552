// The reference linear layer: the same F, B and W as linear.h, as plain loops whose sums run in
// double and are rounded to T once per output element. What the model's GEMMs ran on before
// they moved to a tuned BLAS (linear.h), and what the tests compare those GEMMs with: it is
// independent of any library and as accurate as fp32 outputs allow. Same layouts and contracts
// as linear.h.
#ifndef PIPECOORD_KERNELS_CPU_LINEAR_REFERENCE_H_
#define PIPECOORD_KERNELS_CPU_LINEAR_REFERENCE_H_

#include "kernels/cpu/linear.h"

namespace pipecoord::kernels::cpu {

template <typename T>
void LinearForwardReference(const T* x, const T* w, T* y, const LinearDims& d);

template <typename T>
void LinearBackwardInputReference(const T* dy, const T* w, T* dx, const LinearDims& d,
                                  bool accumulate);

template <typename T>
void LinearBackwardWeightReference(const T* dy, const T* x, T* dw, const LinearDims& d);

// PIPECOORD_CPU_GEMM=reference in the environment (read once): the fp32 GEMMs (linear.h) and
// attention (attention.h) run their reference loops instead of OpenBLAS, as before the move:
// what before/after comparisons (the demo's step time) switch.
bool ReferenceKernelsRequested();

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_LINEAR_REFERENCE_H_
