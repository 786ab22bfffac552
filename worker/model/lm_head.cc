#include "worker/model/lm_head.h"

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
  return static_cast<int64_t>(n * sizeof(T) + targets.size() * sizeof(int32_t));
}

template <typename T>
LmHead<T>::LmHead(const HeadDims& dims, HeadTensors<const T> weights, HeadTensors<T> grads)
    : d_(dims), w_(weights), g_(grads) {}

template <typename T>
double LmHead<T>::Forward(std::vector<T> x, std::span<const int32_t> targets,
                          HeadSaved<T>* s) const {
  const int64_t n = d_.tokens, h = d_.hidden, V = d_.vocab;
  s->x = std::move(x);
  s->rstd.resize(n);
  s->y.resize(n * h);
  RmsNormForward(s->x.data(), w_.norm, s->y.data(), s->rstd.data(), n, h, d_.norm_eps);
  s->logits.resize(n * V);
  LinearForward(s->y.data(), w_.output, s->logits.data(), {n, h, V});
  s->targets.assign(targets.begin(), targets.end());
  return CrossEntropyForward(s->logits.data(), s->targets.data(), n, V);
}

template <typename T>
std::vector<T> LmHead<T>::BackwardInput(double dloss, HeadSaved<T>* s) const {
  const int64_t n = d_.tokens, h = d_.hidden, V = d_.vocab;
  s->dlogits.resize(n * V);
  CrossEntropyBackward(s->logits.data(), s->targets.data(), n, V, dloss, s->dlogits.data());
  std::vector<T>().swap(s->logits);
  std::vector<int32_t>().swap(s->targets);
  s->dy.resize(n * h);
  LinearBackwardInput(s->dlogits.data(), w_.output, s->dy.data(), {n, h, V}, false);
  std::vector<T> dx(n * h);
  RmsNormBackwardInput(s->dy.data(), s->x.data(), w_.norm, s->rstd.data(), dx.data(), n, h, false);
  return dx;
}

template <typename T>
void LmHead<T>::BackwardWeight(HeadSaved<T>* s) const {
  const int64_t n = d_.tokens, h = d_.hidden, V = d_.vocab;
  LinearBackwardWeight(s->dlogits.data(), s->y.data(), g_.output, {n, h, V});
  RmsNormBackwardWeight(s->dy.data(), s->x.data(), s->rstd.data(), g_.norm, n, h);
  *s = HeadSaved<T>();
}

template <typename T>
std::vector<T> LmHead<T>::BackwardFused(double dloss, HeadSaved<T>* s) const {
  const int64_t n = d_.tokens, h = d_.hidden, V = d_.vocab;
  std::vector<T> dlogits(n * V);
  CrossEntropyBackward(s->logits.data(), s->targets.data(), n, V, dloss, dlogits.data());
  std::vector<T> dy(n * h);
  LinearBackwardInput(dlogits.data(), w_.output, dy.data(), {n, h, V}, false);
  LinearBackwardWeight(dlogits.data(), s->y.data(), g_.output, {n, h, V});
  std::vector<T> dx(n * h);
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
