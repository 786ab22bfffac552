// Linear layer without bias, Y = X W^T, split the way zero-bubble pipelines need it:
// forward (F), input gradient (B) and weight gradient (W) are separate functions.
//
// Layouts (row-major): X [n, in], W [out, in] (PyTorch's nn.Linear layout), Y [n, out].
// Sums run in double and are rounded to T once per output element. T is float (the model)
// or double (finite-difference tests). Callers own every buffer; no buffer may alias another.
#ifndef PIPECOORD_KERNELS_CPU_LINEAR_H_
#define PIPECOORD_KERNELS_CPU_LINEAR_H_

#include <cstdint>

namespace pipecoord::kernels::cpu {

struct LinearDims {
  int64_t n = 0;    // rows (tokens)
  int64_t in = 0;   // input features
  int64_t out = 0;  // output features
};

// F: y = x w^T. Overwrites y [n, out].
template <typename T>
void LinearForward(const T* x, const T* w, T* y, const LinearDims& d);

// B: dx = dy w, or dx += dy w when accumulate. dy [n, out], dx [n, in]. Needs no activations.
template <typename T>
void LinearBackwardInput(const T* dy, const T* w, T* dx, const LinearDims& d, bool accumulate);

// W: dw += dy^T x. dw [out, in]: accumulates, so micro-batches add up. Needs no weights.
template <typename T>
void LinearBackwardWeight(const T* dy, const T* x, T* dw, const LinearDims& d);

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_LINEAR_H_
