// RMSNorm on the GPU: the twin of kernels/cpu/rms_norm.h (same math, layouts and split of the
// backward into B and W), y = x * rstd * g per row, rstd = 1 / sqrt(mean(x^2) + eps).
//
// Layouts: x, y, dy, dx [n, h] row-major in T (float or bf16); the gain g [h] in T (the model's
// weight dtype); rstd [n] and the gain gradient dg [h] always float (the gradient feeds the fp32
// master weights). All pointers are device pointers; none may alias another. Work is queued on
// `stream`; a returned error names the failed launch. n = 0 queues nothing.
//
// Precision: row sums and the per-element arithmetic run in double as in the CPU twin (cheap in a
// memory-bound kernel, and dx's difference of two similar terms keeps its digits), rounded once
// to T. Every reduction has a fixed order, so results are deterministic run to run.
#ifndef PIPECOORD_KERNELS_CUDA_RMS_NORM_H_
#define PIPECOORD_KERNELS_CUDA_RMS_NORM_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/status.h"
#include "kernels/cuda/bf16.h"

namespace pipecoord::kernels::cuda {

// F: writes y [n, h] and rstd [n]; y uses the float-rounded rstd, so backward differentiates
// exactly what forward computed (as on the CPU). h >= 1, n <= 2^31 - 1.
Status RmsNormForward(const float* x, const float* g, float* y, float* rstd, int64_t n, int64_t h,
                      double eps, cudaStream_t stream);
Status RmsNormForward(const __nv_bfloat16* x, const __nv_bfloat16* g, __nv_bfloat16* y,
                      float* rstd, int64_t n, int64_t h, double eps, cudaStream_t stream);

// B: dx = rstd (g dy) - x rstd^3 mean(g dy x), per row; dx += that when accumulate.
Status RmsNormBackwardInput(const float* dy, const float* x, const float* g, const float* rstd,
                            float* dx, int64_t n, int64_t h, bool accumulate, cudaStream_t stream);
Status RmsNormBackwardInput(const __nv_bfloat16* dy, const __nv_bfloat16* x,
                            const __nv_bfloat16* g, const float* rstd, __nv_bfloat16* dx,
                            int64_t n, int64_t h, bool accumulate, cudaStream_t stream);

// W: dg += sum over rows of dy * x * rstd (accumulates, so micro-batches add up). Each column
// is summed in double in a fixed order (not the CPU's row order: equal to ~1e-16 relative).
Status RmsNormBackwardWeight(const float* dy, const float* x, const float* rstd, float* dg,
                             int64_t n, int64_t h, cudaStream_t stream);
Status RmsNormBackwardWeight(const __nv_bfloat16* dy, const __nv_bfloat16* x, const float* rstd,
                             float* dg, int64_t n, int64_t h, cudaStream_t stream);

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_RMS_NORM_H_
