// LmHead: the end of the model on the last stage: final RMSNorm, the LM head (untied from the
// embedding) and the cross-entropy loss, split into F, B and W like TransformerBlock.
//
//   y = RMSNorm(x; norm)   logits = y Wout^T   loss = mean over tokens of CE(logits, targets)
//
// B starts from dloss, the gradient of the training objective w.r.t. this micro-batch's loss
// (1/m under gradient accumulation over m micro-batches). T is float or double; x [tokens, h],
// logits [tokens, vocab]; norm [h], output [vocab, h].
//
// Tensor parallelism (dims.tp > 1, float only): a vocabulary-parallel head and cross-entropy, as
// Megatron's. Rank r holds rows [r V/tp, (r+1) V/tp) of output and computes only those logits;
// no rank ever holds a whole row of logits (kernels/cpu/cross_entropy.h's VocabParallel* steps).
// The loss per token is log S - (z - M): M, the row's maximum, from the ranks' maxima gathered
// (GatherFromTensorParallel, tokens floats each); O, the sum of exp(logit - M) over the other
// tokens of the vocabulary, and z, the target's logit (held by one rank, 0 on the others), summed
// over the group in one all-reduce of 2 x tokens floats (S = exp(z - M) + O); F then turns its
// logits into the softmax probabilities in place, p - 1 in the target's column (what B needs, in
// the same bytes). B: each
// rank's dlogits from its probabilities; the input gradient of the head summed over the group
// (tokens x hidden), then the final norm's backward on every rank alike. W: no communication.
// Every rank returns the same loss and the same dx.
//
// Sequence parallelism (dims.sp): x, dx and the final norm are this rank's 1/tp of the tokens;
// F all-gathers the norm's output y before the head (the logits and the loss cover every token,
// targets whole), B reduce-scatters the head's input gradient, W gathers y again (only its
// shard is kept) and the norm gain's gradient covers this rank's tokens (StageModel sums it
// over the group).
#ifndef PIPECOORD_WORKER_MODEL_LM_HEAD_H_
#define PIPECOORD_WORKER_MODEL_LM_HEAD_H_

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/host_pool.h"
#include "worker/parallel/tensor_parallel.h"

namespace pipecoord::model {

struct HeadDims {
  int64_t tokens = 0;
  int64_t hidden = 0;
  int64_t vocab = 0;
  double norm_eps = 1e-5;  // the final RMSNorm's epsilon (ModelConfig::rms_norm_eps)
  int64_t tp = 1;          // vocabulary-parallel degree; divides vocab
  bool sp = false;         // sequence parallelism: x, dx, y and the norm on tokens / tp rows

  int64_t local_vocab() const { return vocab / tp; }
  int64_t local_tokens() const { return sp ? tokens / tp : tokens; }
};

template <typename P>
struct HeadTensors {
  P* norm = nullptr;    // [h]
  P* output = nullptr;  // [vocab, h] (this rank's [vocab/tp, h] rows with tp > 1)
};

template <typename T>
struct HeadSaved {
  kernels::HostBuffer<T> x, rstd, y, logits;  // from F: logits live until B, the rest until W
  kernels::HostBuffer<int32_t> targets;        // until B
  kernels::HostBuffer<float> row_max;          // tp > 1: each token's M, inside F only
  kernels::HostBuffer<T> dlogits, dy;          // from B for W

  int64_t Bytes() const;
};

template <typename T>
class LmHead {
 public:
  // tp: the group's collectives when dims.tp > 1 (float heads only), else null; its errors are
  // sticky (the caller checks its status()).
  LmHead(const HeadDims& dims, HeadTensors<const T> weights, HeadTensors<T> grads,
         worker::parallel::TensorParallel* tp = nullptr);

  // F: returns the mean cross-entropy over tokens; x is moved into saved, targets copied.
  // targets must hold `tokens` ids in [0, vocab) (the caller checks).
  double Forward(kernels::HostBuffer<T> x, std::span<const int32_t> targets, HeadSaved<T>* saved) const;
  // B: returns dx [tokens, h]; keeps y, dlogits and what the norm's W part needs.
  kernels::HostBuffer<T> BackwardInput(double dloss, HeadSaved<T>* saved) const;
  // W: adds the gradients of norm and output; saved is empty afterwards.
  void BackwardWeight(HeadSaved<T>* saved) const;
  // Where W adds the gradients from now on (ZeRO-2 allocates them again each step).
  void set_grads(HeadTensors<T> grads) { g_ = grads; }
  // One-pass baseline, bit-identical to BackwardInput + BackwardWeight.
  kernels::HostBuffer<T> BackwardFused(double dloss, HeadSaved<T>* saved) const;

 private:
  double ParallelLoss(HeadSaved<T>* s) const;
  kernels::HostBuffer<T> GatherSequence(const kernels::HostBuffer<T>& shard) const;  // sp: every token's rows
  void ReduceFromTensorParallel(kernels::HostBuffer<T>& partial) const;
  void ParallelDlogits(double dloss, HeadSaved<T>* s) const;
  void Dlogits(double dloss, HeadSaved<T>* s) const;

  HeadDims d_;
  HeadTensors<const T> w_;
  HeadTensors<T> g_;
  worker::parallel::TensorParallel* tp_;
};

extern template struct HeadSaved<float>;
extern template struct HeadSaved<double>;
extern template class LmHead<float>;
extern template class LmHead<double>;

}  // namespace pipecoord::model

#endif  // PIPECOORD_WORKER_MODEL_LM_HEAD_H_
