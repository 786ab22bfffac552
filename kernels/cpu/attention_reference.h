// The reference attention: the same F and B as attention.h, as plain loops whose dot products
// and softmax sums run in double and are rounded to T once per stored element. What the CPU
// backend's attention ran before it moved to per-head sgemm (attention.h), what the tests
// compare the fp32 path with, and what T = double (finite-difference tests) runs. Same layouts
// and contracts as attention.h.
#ifndef PIPECOORD_KERNELS_CPU_ATTENTION_REFERENCE_H_
#define PIPECOORD_KERNELS_CPU_ATTENTION_REFERENCE_H_

#include "kernels/cpu/attention.h"

namespace pipecoord::kernels::cpu {

template <typename T>
void AttentionForwardReference(const T* q, const T* k, const T* v, T* probs, T* o,
                               const AttentionDims& d);

template <typename T>
void AttentionBackwardReference(const T* dout, const T* q, const T* k, const T* v, const T* probs,
                                T* dq, T* dk, T* dv, const AttentionDims& d);

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_ATTENTION_REFERENCE_H_
