// Cross-entropy fused with log-softmax on the GPU: the twin of kernels/cpu/cross_entropy.h,
// the loss averaged over tokens (F) and its logits gradient (B), or both in one pass.
//
// Layouts: logits and dlogits [n, vocab] row-major in T (float or bf16); targets [n] int32.
// Device pointers. One block per row: the row's max, then sum(exp(x - max)) in double (the
// exps themselves in float), then the outputs. Every sum has a fixed order: deterministic.
// A target outside [0, vocab) gives that row a NaN loss and NaN gradients (never a read
// outside the row); the CPU twin leaves that check to its caller.
#ifndef PIPECOORD_KERNELS_CUDA_CROSS_ENTROPY_H_
#define PIPECOORD_KERNELS_CUDA_CROSS_ENTROPY_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/status.h"
#include "kernels/cuda/bf16.h"

namespace pipecoord::kernels::cuda {

// F: loss_per_token[r] = logsumexp(logits[r]) - logits[r][targets[r]] (float [n]) and
// mean_loss[0] = (1/n) sum_r of the same in double (0 when n = 0). Either output may be null.
Status CrossEntropyForward(const float* logits, const int32_t* targets, int64_t n, int64_t vocab,
                           float* loss_per_token, double* mean_loss, cudaStream_t stream);
Status CrossEntropyForward(const __nv_bfloat16* logits, const int32_t* targets, int64_t n,
                           int64_t vocab, float* loss_per_token, double* mean_loss,
                           cudaStream_t stream);

// B: dlogits = dloss * (softmax(logits[r]) - onehot(targets[r])) / n; overwrites dlogits, which
// may be logits itself (in place). dloss: the objective's gradient w.r.t. this loss (1/m under
// gradient accumulation). The target's entry is computed as -(sum of the other exps) / sum, so
// it keeps its digits when the softmax is confident (p near 1).
Status CrossEntropyBackward(const float* logits, const int32_t* targets, int64_t n, int64_t vocab,
                            double dloss, float* dlogits, cudaStream_t stream);
Status CrossEntropyBackward(const __nv_bfloat16* logits, const int32_t* targets, int64_t n,
                            int64_t vocab, double dloss, __nv_bfloat16* dlogits,
                            cudaStream_t stream);

// F and B from one read of the logits (the same values as the two calls above).
Status CrossEntropyForwardBackward(const float* logits, const int32_t* targets, int64_t n,
                                   int64_t vocab, double dloss, float* loss_per_token,
                                   double* mean_loss, float* dlogits, cudaStream_t stream);
Status CrossEntropyForwardBackward(const __nv_bfloat16* logits, const int32_t* targets,
                                   int64_t n, int64_t vocab, double dloss, float* loss_per_token,
                                   double* mean_loss, __nv_bfloat16* dlogits,
                                   cudaStream_t stream);

// The vocabulary-parallel cross-entropy's four steps on the device (kernels/cpu/cross_entropy.h's
// VocabParallel* say what each computes; the host stand-ins of worker/cuda call those); the
// collectives between them (gather the maxima, sum `sums` over the group) are the caller's.
// logits [n, vl]: this rank's vocabulary slice [first, first + vl); mine and row_max [n],
// gathered_max [tp n], sums [2n] float; targets [n] int32 (global ids); mean_loss one double:
// (1/n) sum of the rows' losses (a tree sum: it may differ from the CPU's left-to-right sum in the
// last bits; exp and log in double, so the rest agrees to rounding). The probabilities (p - 1 in
// the target's column) overwrite the logits in T. One block per row; fixed orders:
// deterministic. INVALID_ARGUMENT for n < 0, vl < 1, tp < 1 or a null pointer.
Status VocabParallelRowMax(const float* logits, int64_t n, int64_t vl, float* mine, cudaStream_t stream);
Status VocabParallelRowMax(const __nv_bfloat16* logits, int64_t n, int64_t vl, float* mine, cudaStream_t stream);
Status VocabParallelSums(const float* logits, const int32_t* targets, int64_t n, int64_t vl, int64_t first,
                         const float* gathered_max, int tp, float* row_max, float* sums, cudaStream_t stream);
Status VocabParallelSums(const __nv_bfloat16* logits, const int32_t* targets, int64_t n, int64_t vl, int64_t first,
                         const float* gathered_max, int tp, float* row_max, float* sums, cudaStream_t stream);
Status VocabParallelLossAndProbs(float* logits, int64_t n, int64_t vl, int64_t first, const int32_t* targets,
                                 const float* row_max, const float* sums, double* mean_loss, cudaStream_t stream);
Status VocabParallelLossAndProbs(__nv_bfloat16* logits, int64_t n, int64_t vl, int64_t first, const int32_t* targets,
                                 const float* row_max, const float* sums, double* mean_loss, cudaStream_t stream);
Status VocabParallelDlogits(const float* probs, int64_t n, int64_t vl, double dloss, float* dlogits,
                            cudaStream_t stream);
Status VocabParallelDlogits(const __nv_bfloat16* probs, int64_t n, int64_t vl, double dloss, __nv_bfloat16* dlogits,
                            cudaStream_t stream);

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_CROSS_ENTROPY_H_
