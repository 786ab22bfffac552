// The few elementwise steps the CUDA stage model needs besides kernels/cuda's layers: the
// residual additions of a transformer block, the bf16 copies of fp32 master weights, and the
// step's loss sum kept on the device; and the data-parallel all-reduce's (device_gradients.h):
// received chunks added into the gradients (AddInPlace), the mean taken (ScaleInPlace).
//
// All pointers are device pointers on the stream's device; work is queued on `stream`; an error
// names the failed launch or argument. n = 0 queues nothing.
#ifndef PIPECOORD_WORKER_CUDA_ELEMENTWISE_H_
#define PIPECOORD_WORKER_CUDA_ELEMENTWISE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/status.h"
#include "kernels/cuda/bf16.h"

namespace pipecoord::worker::cuda {

// acc[i] += x[i] (a residual connection), summed in float and rounded once to the storage type,
// as the CPU model's float addition. acc and x must not overlap.
Status AddInPlace(float* acc, const float* x, int64_t n, cudaStream_t stream);
Status AddInPlace(__nv_bfloat16* acc, const __nv_bfloat16* x, int64_t n, cudaStream_t stream);

// y[r, c] += b[c] over rows x cols (the q, k, v biases of Qwen2), in float, rounded once to the
// storage type, as the CPU model's AddBias. y and b must not overlap.
Status AddBias(float* y, const float* b, int64_t rows, int64_t cols, cudaStream_t stream);
Status AddBias(__nv_bfloat16* y, const __nv_bfloat16* b, int64_t rows, int64_t cols, cudaStream_t stream);

// db[c] += the sum over rows of dy[r, c], added into the fp32 gradient in row order (the CPU
// model's AddBiasGrad, bit for bit on f32; deterministic). A thread per column walks the rows.
Status AddBiasGrad(const float* dy, float* db, int64_t rows, int64_t cols, cudaStream_t stream);
Status AddBiasGrad(const __nv_bfloat16* dy, float* db, int64_t rows, int64_t cols, cudaStream_t stream);

// x[i] = x[i] * factor, one f32 multiplication (the all-reduce's sum to mean, as the host
// all-reduce's x * (1/dp)).
Status ScaleInPlace(float* x, float factor, int64_t n, cudaStream_t stream);

// out[i] = in[i] rounded to bf16 (nearest even): the compute copy of an fp32 master weight.
Status CastToBf16(const float* in, __nv_bfloat16* out, int64_t n, cudaStream_t stream);

// out[i] = in[i] as a float (exact): a bf16 activation widened for the f32 tensor-parallel ring.
Status CastToFloat(const __nv_bfloat16* in, float* out, int64_t n, cudaStream_t stream);
// *acc += the sum of x[i]^2 in double: one tensor's share of the gradients' global norm
// (clipping). `partials` is device scratch of kSumOfSquaresScratch doubles. The same inputs give
// the same bits every run; the order of the additions is a tree per block, then the blocks in
// order (a sequential sum differs from it in double rounding only).
inline constexpr int kSumOfSquaresScratch = 128;
Status AccumulateSumOfSquares(const float* x, int64_t n, double* acc, double* partials, cudaStream_t stream);

// *acc += *value: adds one micro-batch's loss to the step's sum without a host round trip.
Status AccumulateScalar(double* acc, const double* value, cudaStream_t stream);
Status AccumulateScalar(double* acc, const float* value, cudaStream_t stream);

}  // namespace pipecoord::worker::cuda

#endif  // PIPECOORD_WORKER_CUDA_ELEMENTWISE_H_
