// Cross-entropy loss over a vocabulary, averaged over tokens: the end of the forward pass and
// the seed of the backward pass.
//
// Layouts: logits and dlogits [n, vocab] row-major; targets [n], each in [0, vocab) (the
// caller checks). Log-sum-exp and the mean run in double. The loss has no weights.
#ifndef PIPECOORD_KERNELS_CPU_CROSS_ENTROPY_H_
#define PIPECOORD_KERNELS_CPU_CROSS_ENTROPY_H_

#include <cstdint>

namespace pipecoord::kernels::cpu {

// F: (1/n) sum_r (logsumexp(logits[r]) - logits[r][targets[r]]), rows summed in order.
template <typename T>
double CrossEntropyForward(const T* logits, const int32_t* targets, int64_t n, int64_t vocab);

// B: dlogits = dloss * (softmax(logits[r]) - onehot(targets[r])) / n; overwrites dlogits.
// dloss is the gradient of the objective w.r.t. this loss (1/m under gradient accumulation).
template <typename T>
void CrossEntropyBackward(const T* logits, const int32_t* targets, int64_t n, int64_t vocab,
                          double dloss, T* dlogits);

// The vocabulary-parallel cross-entropy (Megatron-LM's vocab_parallel_cross_entropy): each of
// the tp ranks of a group holds the logits of its vocabulary slice [first, first + vl) only, in
// [n, vl]; no rank ever holds a whole row. Four steps around two collectives of the group:
//   1. VocabParallelRowMax        mine[r] = the max of this rank's row r
//      (gathered over the group, rank k's at [k n, (k+1) n))
//   2. VocabParallelSums          row_max[r] = M = the max of the gathered maxima (rank order);
//                                 sums[r] = the sum of exp(logit - M) over this rank's columns
//                                 except the target's, in double, rounded to float; sums[n + r]
//                                 = the target's logit z if this rank holds it, else 0
//      (sums [2n], then summed over the group: O, the other tokens' exps, and z)
//   3. VocabParallelLossAndProbs  returns (1/n) sum_r log1p(O exp(M - z)) in double, rows in
//                                 order (log S - (z - M), S = exp(z - M) + O, without
//                                 log S's cancellation when the target is confident), and turns
//                                 the logits into this rank's softmax probabilities in place, the
//                                 target's column into p - 1 = -O / S (so it keeps its digits
//                                 when p is near 1): all B needs, in the logits' bytes
//   4. VocabParallelDlogits       dlogits = dloss / n * what step 3 left
// These are the arithmetic of record: the CPU model's head runs them, and the CUDA launchers of
// kernels/cuda/cross_entropy.h compute the same steps (their host stand-ins call these).
template <typename T>
void VocabParallelRowMax(const T* logits, int64_t n, int64_t vl, float* mine);
template <typename T>
void VocabParallelSums(const T* logits, const int32_t* targets, int64_t n, int64_t vl, int64_t first,
                       const float* gathered_max, int tp, float* row_max, float* sums);
template <typename T>
double VocabParallelLossAndProbs(T* logits, int64_t n, int64_t vl, int64_t first, const int32_t* targets,
                                 const float* row_max, const float* sums);
template <typename T>
void VocabParallelDlogits(const T* probs, int64_t n, int64_t vl, double dloss, T* dlogits);

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_CROSS_ENTROPY_H_
