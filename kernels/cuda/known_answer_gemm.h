// The known-answer GEMM probe on the GPU: the twin of kernels/cpu/known_answer_gemm.h, equal to
// it bit for bit, so the coordinator's expected checksum (computed on a CPU) tells a healthy GPU
// worker from one whose arithmetic is off.
//
// The inputs are drawn on the host exactly as the CPU probe draws them (cpu::Rng(seed): X [n, n]
// then W [n, n], uniform in [-1, 1)) and copied to the device; Y = X W^T is computed by
// ExactLinearForward (double sums in index order, one rounding per element) and hashed by the
// GPU's HashFloats.
#ifndef PIPECOORD_KERNELS_CUDA_KNOWN_ANSWER_GEMM_H_
#define PIPECOORD_KERNELS_CUDA_KNOWN_ANSWER_GEMM_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/status.h"

namespace pipecoord::kernels::cuda {

// Writes Y = X W^T for the seeded n x n inputs to y (device memory, n * n floats); n >= 1.
// Waits for `stream` until the inputs are on the device (they are drawn on the host); the
// product itself is queued on `stream`.
Status KnownAnswerGemm(uint64_t seed, int n, float* y, cudaStream_t stream);

// HashFloats(Y) computed on the GPU; equals cpu::HashFloats of cpu::KnownAnswerGemm(seed, {n, n,
// n}). Waits for the stream.
Result<uint64_t> KnownAnswerChecksum(uint64_t seed, int n, cudaStream_t stream);

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_KNOWN_ANSWER_GEMM_H_
