// The reference RMSNorm: the same F, B and W as rms_norm.h, as plain loops whose row sums run in
// double in index order, each output rounded to T once. What the fp32 norm ran before it moved to
// vector code (rms_norm.h), what the tests compare that path with, and what T = double
// (finite-difference tests) and PIPECOORD_CPU_GEMM=reference run. Same contracts as rms_norm.h.
#ifndef PIPECOORD_KERNELS_CPU_RMS_NORM_REFERENCE_H_
#define PIPECOORD_KERNELS_CPU_RMS_NORM_REFERENCE_H_

#include <cstdint>

namespace pipecoord::kernels::cpu {

template <typename T>
void RmsNormForwardReference(const T* x, const T* g, T* y, T* rstd, int64_t n, int64_t h,
                             double eps);

template <typename T>
void RmsNormBackwardInputReference(const T* dy, const T* x, const T* g, const T* rstd, T* dx,
                                   int64_t n, int64_t h, bool accumulate);

template <typename T>
void RmsNormBackwardWeightReference(const T* dy, const T* x, const T* rstd, T* dg, int64_t n,
                                    int64_t h);

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_RMS_NORM_REFERENCE_H_
