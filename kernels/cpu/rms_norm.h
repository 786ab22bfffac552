// RMSNorm (Zhang & Sennrich): y = x * rstd * g per row, rstd = 1 / sqrt(mean(x^2) + eps).
//
// Layouts: x, y, dx, dy [n, h] row-major; gain g and its gradient dg [h]; rstd [n].
// The input gradient (B) and the gain gradient (W) are separate functions. Row sums run in
// double, each output is rounded once. T = float runs vector code whose row sums use lane_sum.h's
// fixed order (bit-identical reruns; rms_norm_test compares it with the reference); T = double,
// and fp32 under PIPECOORD_CPU_GEMM=reference, run rms_norm_reference.h's index-order loops.
// Callers own every buffer; none may alias another.
#ifndef PIPECOORD_KERNELS_CPU_RMS_NORM_H_
#define PIPECOORD_KERNELS_CPU_RMS_NORM_H_

#include <cstdint>

namespace pipecoord::kernels::cpu {

// F: writes y [n, h] and the per-row rstd [n] (kept for both backward parts). y is computed
// from the rounded rstd, so backward differentiates exactly what forward computed.
template <typename T>
void RmsNormForward(const T* x, const T* g, T* y, T* rstd, int64_t n, int64_t h, double eps);

// B: dx = rstd (g dy) - x rstd^3 mean(g dy x), per row; dx += that when accumulate.
template <typename T>
void RmsNormBackwardInput(const T* dy, const T* x, const T* g, const T* rstd, T* dx, int64_t n,
                          int64_t h, bool accumulate);

// W: dg += sum over rows of dy * x * rstd (summed in double, in row order).
template <typename T>
void RmsNormBackwardWeight(const T* dy, const T* x, const T* rstd, T* dg, int64_t n, int64_t h);

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_RMS_NORM_H_
