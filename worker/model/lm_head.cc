#include "worker/model/lm_head.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/rms_norm.h"
#include "worker/model/model_config.h"

namespace pipecoord::model {

using namespace kernels::cpu;  // NOLINT: the ops are this file's vocabulary

template <typename T>
int64_t HeadSaved<T>::Bytes() const {
  const size_t n = x.size() + rstd.size() + y.size() + logits.size() + dlogits.size() + dy.size();
  return static_cast<int64_t>(n * sizeof(T) + targets.size() * sizeof(int32_t) + row_max.size() * sizeof(float));
}

template <typename T>
LmHead<T>::LmHead(const HeadDims& dims, HeadTensors<const T> weights, HeadTensors<T> grads,
                  worker::parallel::TensorParallel* tp)
    : d_(dims), w_(weights), g_(grads), tp_(tp) {}

// The vocabulary-parallel loss (lm_head.h): M gathered, S and z summed, in f32 across the group.
template <typename T>
double LmHead<T>::ParallelLoss(HeadSaved<T>* s) const {
  if constexpr (!std::is_same_v<T, float>) {
    return 0;  // tp > 1 is float only (StageModel never builds a double head with tp)
  } else {
    const int64_t n = d_.tokens, Vl = d_.local_vocab(), first = Vl * tp_->rank();
    kernels::HostBuffer<float> mine(n), all(n * tp_->size());
    VocabParallelRowMax(s->logits.data(), n, Vl, mine.data());
    (void)tp_->GatherFromTensorParallel(mine, all);
    s->row_max.assign(n, 0);
    kernels::HostBuffer<float> sums(2 * n, 0.f);  // [the other tokens' exps..., z or 0...]
    VocabParallelSums(s->logits.data(), s->targets.data(), n, Vl, first, all.data(), tp_->size(), s->row_max.data(),
                      sums.data());
    (void)tp_->ReduceFromTensorParallel(sums);
    // The logits become this rank's softmax probabilities in place: all B needs, in the bytes
    // the whole head keeps its logits in (memory/'s pipecoord-cpu recipe counts those).
    const double loss = VocabParallelLossAndProbs(s->logits.data(), n, Vl, first, s->targets.data(), s->row_max.data(),
                                                  sums.data());
    kernels::HostBuffer<float>().swap(s->row_max);
    return loss;
  }
}

template <typename T>
void LmHead<T>::ParallelDlogits(double dloss, HeadSaved<T>* s) const {
  const int64_t n = d_.tokens, Vl = d_.local_vocab();
  s->dlogits.resize(n * Vl);
  VocabParallelDlogits(s->logits.data(), n, Vl, dloss, s->dlogits.data());
}

template <typename T>
kernels::HostBuffer<T> LmHead<T>::GatherSequence(const kernels::HostBuffer<T>& shard) const {
  if constexpr (std::is_same_v<T, float>) {
    if (d_.sp && tp_ != nullptr) return worker::parallel::GatherSequence(*tp_, shard);  // sticky errors
  }
  return shard;
}

template <typename T>
double LmHead<T>::Forward(kernels::HostBuffer<T> x, std::span<const int32_t> targets,
                          HeadSaved<T>* s) const {
  const int64_t n = d_.tokens, nl = d_.local_tokens(), h = d_.hidden, V = d_.vocab;
  s->x = std::move(x);
  s->rstd.resize(nl);
  s->y.resize(nl * h);
  RmsNormForward(s->x.data(), w_.norm, s->y.data(), s->rstd.data(), nl, h, d_.norm_eps);
  const int64_t Vl = d_.local_vocab();
  s->logits.resize(n * Vl);
  const kernels::HostBuffer<T> y_all = d_.sp ? GatherSequence(s->y) : kernels::HostBuffer<T>();
  LinearForward(d_.sp ? y_all.data() : s->y.data(), w_.output, s->logits.data(), {n, h, Vl});
  s->targets.assign(targets.begin(), targets.end());
  if (d_.tp > 1) return ParallelLoss(s);
  return CrossEntropyForward(s->logits.data(), s->targets.data(), n, V);
}

template <typename T>
void LmHead<T>::ReduceFromTensorParallel(kernels::HostBuffer<T>& partial) const {
  if constexpr (std::is_same_v<T, float>) {
    if (tp_ == nullptr) return;
    if (d_.sp) {  // this rank's rows of the sum
      partial = worker::parallel::ScatterSequence(*tp_, std::move(partial));
      return;
    }
    (void)tp_->ReduceFromTensorParallel(partial);  // sticky: the caller checks
  }
}

// s->dlogits from the saved logits (or, with tp > 1, this rank's probabilities).
template <typename T>
void LmHead<T>::Dlogits(double dloss, HeadSaved<T>* s) const {
  if (d_.tp > 1) {
    ParallelDlogits(dloss, s);
    return;
  }
  const int64_t n = d_.tokens, V = d_.vocab;
  s->dlogits.resize(n * V);
  CrossEntropyBackward(s->logits.data(), s->targets.data(), n, V, dloss, s->dlogits.data());
}

template <typename T>
kernels::HostBuffer<T> LmHead<T>::BackwardInput(double dloss, HeadSaved<T>* s) const {
  const int64_t n = d_.tokens, nl = d_.local_tokens(), h = d_.hidden, Vl = d_.local_vocab();
  Dlogits(dloss, s);
  kernels::HostBuffer<T>().swap(s->logits);
  kernels::HostBuffer<int32_t>().swap(s->targets);
  s->dy.resize(n * h);
  LinearBackwardInput(s->dlogits.data(), w_.output, s->dy.data(), {n, h, Vl}, false);
  ReduceFromTensorParallel(s->dy);  // the vocabulary-parallel head's input gradient (sp: its shard)
  kernels::HostBuffer<T> dx(nl * h);
  RmsNormBackwardInput(s->dy.data(), s->x.data(), w_.norm, s->rstd.data(), dx.data(), nl, h, false);
  return dx;
}

template <typename T>
void LmHead<T>::BackwardWeight(HeadSaved<T>* s) const {
  const int64_t n = d_.tokens, nl = d_.local_tokens(), h = d_.hidden, Vl = d_.local_vocab();
  const kernels::HostBuffer<T> y_all = d_.sp ? GatherSequence(s->y) : kernels::HostBuffer<T>();
  LinearBackwardWeight(s->dlogits.data(), d_.sp ? y_all.data() : s->y.data(), g_.output, {n, h, Vl});
  RmsNormBackwardWeight(s->dy.data(), s->x.data(), s->rstd.data(), g_.norm, nl, h);
  *s = HeadSaved<T>();
}

template <typename T>
kernels::HostBuffer<T> LmHead<T>::BackwardFused(double dloss, HeadSaved<T>* s) const {
  if (d_.sp) {  // B then W (W's gather of y is its own)
    kernels::HostBuffer<T> dx = BackwardInput(dloss, s);
    BackwardWeight(s);
    return dx;
  }
  const int64_t n = d_.tokens, h = d_.hidden, Vl = d_.local_vocab();
  Dlogits(dloss, s);
  kernels::HostBuffer<T> dlogits = std::move(s->dlogits);
  kernels::HostBuffer<T> dy(n * h);
  LinearBackwardInput(dlogits.data(), w_.output, dy.data(), {n, h, Vl}, false);
  ReduceFromTensorParallel(dy);
  LinearBackwardWeight(dlogits.data(), s->y.data(), g_.output, {n, h, Vl});
  kernels::HostBuffer<T> dx(n * h);
  RmsNormBackwardInput(dy.data(), s->x.data(), w_.norm, s->rstd.data(), dx.data(), n, h, false);
  RmsNormBackwardWeight(dy.data(), s->x.data(), s->rstd.data(), g_.norm, n, h);
  *s = HeadSaved<T>();
  return dx;
}

template struct HeadSaved<float>;
template struct HeadSaved<double>;
template class LmHead<float>;
template class LmHead<double>;

}  // namespace pipecoord::model
