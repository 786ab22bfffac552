// Causal multi-head self-attention on the GPU with the flash-attention algorithm: the twin of
// kernels/cpu/attention.h (same layouts and scale) that never holds the seq x seq scores.
//
// Layouts (row-major): q, o, dout, dq [batch, seq, heads, head_dim] and k, v, dk, dv [batch, seq,
// kv_heads, head_dim] in T (float or bf16); lse and delta [batch, heads, seq] in float. Grouped-
// query attention as the CPU twin: query head h reads key/value head h / (heads / kv_heads), and
// dk, dv sum the group's query heads (one block owns each sum, so it stays deterministic);
// kv_heads == heads (or 0) is plain multi-head attention. Scores are q_i . k_j / sqrt(head_dim)
// for j <= i, and with a sliding window w (AttentionDims::window, Mistral's) i - w < j: tiles wholly
// before a block's window are skipped, the rest masked. All pointers are device pointers; no output
// may alias another buffer. Work is queued on `stream`; an error names the failed launch or check.
//
// Algorithm. Forward: each block holds 64 query rows and walks the key tiles (64 keys) up to
// the diagonal, keeping a running max and running sum per row (online softmax) and rescaling
// its output accumulator when the max grows; it writes o and each row's log-sum-exp, lse_i =
// log(sum_j<=i exp(score_ij)). Backward: delta_i = rowsum(dout_i * o_i) first; then one kernel
// per key tile (64 keys, walking query tiles of 32 rows) recomputes P = exp(score - lse) tile by
// tile and sums dv = P^T dout and dk = dS^T q, dS = P (dout v^T - delta); a second kernel per
// query tile (32 rows, walking key tiles) sums dq = dS k. dq is not accumulated across key tiles
// with atomics, so every output is deterministic: the same bits on every run.
//
// Precision: the softmax statistics, exp, masks and rescaling are fp32 for both dtypes, and
// outputs are rounded to T once. float storage: every product and sum is fp32 too (shared-memory
// tiles, no tensor cores; attention_kernels.h). bf16 storage: the matrix products run on tensor
// cores (bf16 x bf16 summed in fp32): the forward through register-level mma.sync kernels
// (attention_mma_kernels.h) when head_dim is a multiple of 8 and every tensor 16-byte aligned,
// otherwise, and for the backward, through WMMA (attention_tensor_core_kernels.h), so the
// probabilities P and the score gradients dS are rounded to bf16 before they multiply v, k, q
// and dout, as in FlashAttention (about 2^-9 relative per element; the CPU twin in double on
// the same bf16 inputs stays within 2e-2 of the largest value, see attention_test.cc).
#ifndef PIPECOORD_KERNELS_CUDA_ATTENTION_H_
#define PIPECOORD_KERNELS_CUDA_ATTENTION_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/status.h"
#include "kernels/cpu/attention.h"
#include "kernels/cuda/bf16.h"  // __nv_bfloat16, declared for g++-built callers

namespace pipecoord::kernels::cuda {

// Limits (others are refused with INVALID_ARGUMENT before anything is queued): head_dim in
// [1, 128] (tiles are sized for up to 128); batch and heads in [1, 65535] (grid dimensions);
// seq in [1, 2^30]; kv_heads 0 or a divisor of heads; window >= 0 (0 or >= seq: plain causal).
inline constexpr int64_t kFlashMaxHeadDim = 128;
inline constexpr int64_t kFlashMaxBatch = 65535;
inline constexpr int64_t kFlashMaxHeads = 65535;
inline constexpr int64_t kFlashMaxSeq = int64_t{1} << 30;

// OK when `d` is within the limits above; otherwise INVALID_ARGUMENT naming the dimension.
Status CheckFlashAttentionDims(const cpu::AttentionDims& d);

// F: writes o and lse (kept for backward).
Status FlashAttentionForward(const float* q, const float* k, const float* v, float* o, float* lse,
                             const cpu::AttentionDims& d, cudaStream_t stream);
Status FlashAttentionForward(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                             __nv_bfloat16* o, float* lse, const cpu::AttentionDims& d,
                             cudaStream_t stream);

// B: overwrites dq, dk, dv from dout, the forward's inputs, its o and lse. `delta` is scratch
// [batch, heads, seq] that receives rowsum(dout * o) (the caller owns it, so nothing here
// allocates memory).
Status FlashAttentionBackward(const float* dout, const float* q, const float* k, const float* v,
                              const float* o, const float* lse, float* delta, float* dq, float* dk,
                              float* dv, const cpu::AttentionDims& d, cudaStream_t stream);
Status FlashAttentionBackward(const __nv_bfloat16* dout, const __nv_bfloat16* q,
                              const __nv_bfloat16* k, const __nv_bfloat16* v,
                              const __nv_bfloat16* o, const float* lse, float* delta,
                              __nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv,
                              const cpu::AttentionDims& d, cudaStream_t stream);

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_ATTENTION_H_
