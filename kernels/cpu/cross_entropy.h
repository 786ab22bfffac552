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

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_CROSS_ENTROPY_H_
