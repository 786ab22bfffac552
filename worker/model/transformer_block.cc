#include "worker/model/transformer_block.h"

#include <chrono>
#include <type_traits>
#include <utility>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/swiglu.h"
#include "worker/model/model_config.h"

namespace pipecoord::model {
namespace {

using namespace kernels::cpu;  // NOLINT: the ops are this file's vocabulary

template <typename T>
void Free(kernels::HostBuffer<T>& v) {
  kernels::HostBuffer<T>().swap(v);
}

template <typename T>
void AddInPlace(kernels::HostBuffer<T>& acc, const kernels::HostBuffer<T>& x) {
  for (size_t i = 0; i < acc.size(); ++i) acc[i] += x[i];
}

// y[r, c] += b[c] over rows x cols (no bias: nothing).
template <typename T>
void AddBias(T* y, const T* b, int64_t rows, int64_t cols) {
  if (b == nullptr) return;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] += b[c];
  }
}

// db[c] += sum over rows of dy[r, c] (no bias: nothing).
template <typename T>
void AddBiasGrad(const T* dy, T* db, int64_t rows, int64_t cols) {
  if (db == nullptr) return;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) db[c] += dy[r * cols + c];
  }
}

}  // namespace

template <typename T>
int64_t BlockSaved<T>::Bytes() const {
  size_t n = 0;
  for (const kernels::HostBuffer<T>* t : {&x, &rstd1, &a, &q, &k, &v, &probs, &o, &x1, &rstd2, &c, &gate,
                                  &up, &z, &dy, &dgate, &dup, &dc, &dx1, &dq, &dk, &dv, &da}) {
    n += t->size();
  }
  return static_cast<int64_t>(n * sizeof(T));
}

template <typename T>
TransformerBlock<T>::TransformerBlock(const BlockDims& dims, BlockTensors<const T> weights,
                                      BlockTensors<T> grads,
                                      std::shared_ptr<const RopeTable> rope,
                                      worker::parallel::TensorParallel* tp)
    : d_(dims), w_(weights), g_(grads), rope_(std::move(rope)), tp_(tp) {}

template <typename T>
void TransformerBlock<T>::ReduceFromTensorParallel(kernels::HostBuffer<T>& partial) const {
  if constexpr (std::is_same_v<T, float>) {
    if (tp_ != nullptr) (void)tp_->ReduceFromTensorParallel(partial);  // sticky: the caller checks tp->status()
  }
}

template <typename T>
kernels::HostBuffer<T> TransformerBlock<T>::Forward(kernels::HostBuffer<T> x, BlockSaved<T>* s) const {
  kernels::HostBuffer<T> y = ForwardAll(std::move(x), s);
  if (d_.recompute == Recompute::kSelective) Free(s->probs);
  if (d_.recompute == Recompute::kFull) {
    kernels::HostBuffer<T> input = std::move(s->x);
    *s = BlockSaved<T>();
    s->x = std::move(input);
  }
  return y;
}

template <typename T>
void TransformerBlock<T>::Rebuild(BlockSaved<T>* s) const {
  if (d_.recompute == Recompute::kNone) return;
  const auto start = std::chrono::steady_clock::now();
  if (d_.recompute == Recompute::kSelective) {
    // The core again from q, k, v: the same kernel, so the same probabilities, bit for bit.
    const AttentionDims ad = d_.attention();
    s->probs.resize(ad.probs_size());
    kernels::HostBuffer<T> o(d_.tokens() * d_.local_width());
    AttentionForward(s->q.data(), s->k.data(), s->v.data(), s->probs.data(), o.data(), ad);
  } else {
    kernels::HostBuffer<T> x = std::move(s->x);
    *s = BlockSaved<T>();
    (void)ForwardAll(std::move(x), s);
  }
  recompute_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
}

template <typename T>
kernels::HostBuffer<T> TransformerBlock<T>::GatherSequence(const kernels::HostBuffer<T>& shard) const {
  if constexpr (std::is_same_v<T, float>) {
    if (d_.sp && tp_ != nullptr) return worker::parallel::GatherSequence(*tp_, shard);  // sticky errors
  }
  return shard;
}

template <typename T>
kernels::HostBuffer<T> TransformerBlock<T>::ScatterSequence(kernels::HostBuffer<T> partial) const {
  if constexpr (std::is_same_v<T, float>) {
    if (d_.sp && tp_ != nullptr) return worker::parallel::ScatterSequence(*tp_, std::move(partial));
  }
  ReduceFromTensorParallel(partial);
  return partial;
}

template <typename T>
kernels::HostBuffer<T> TransformerBlock<T>::ForwardAll(kernels::HostBuffer<T> x, BlockSaved<T>* s) const {
  const int64_t n = d_.tokens(), nl = d_.local_tokens(), h = d_.hidden, hq = d_.local_width(),
                hkv = d_.local_kv_width(), f = d_.local_ffn();
  const AttentionDims ad = d_.attention();
  s->x = std::move(x);
  s->rstd1.resize(nl);
  s->a.resize(nl * h);
  RmsNormForward(s->x.data(), w_.attention_norm, s->a.data(), s->rstd1.data(), nl, h, d_.norm_eps);
  // Column-parallel q, k, v: this rank's heads, over every token (gathered with sp).
  const kernels::HostBuffer<T> a_all = d_.sp ? GatherSequence(s->a) : kernels::HostBuffer<T>();
  const T* a = d_.sp ? a_all.data() : s->a.data();
  s->q.resize(n * hq);
  s->k.resize(n * hkv);
  s->v.resize(n * hkv);
  LinearForward(a, w_.wq, s->q.data(), {n, h, hq});
  LinearForward(a, w_.wk, s->k.data(), {n, h, hkv});
  LinearForward(a, w_.wv, s->v.data(), {n, h, hkv});
  AddBias(s->q.data(), w_.bq, n, hq);
  AddBias(s->k.data(), w_.bk, n, hkv);
  AddBias(s->v.data(), w_.bv, n, hkv);
  RopeForward(s->q.data(), *rope_, d_.batch, d_.local_heads());
  RopeForward(s->k.data(), *rope_, d_.batch, d_.local_kv_heads());
  s->probs.resize(ad.probs_size());
  s->o.resize(n * hq);
  AttentionForward(s->q.data(), s->k.data(), s->v.data(), s->probs.data(), s->o.data(), ad);
  // Row-parallel wo: each rank's heads' share of the projection, summed over the group (g).
  kernels::HostBuffer<T> x1(n * h);
  LinearForward(s->o.data(), w_.wo, x1.data(), {n, hq, h});
  s->x1 = ScatterSequence(std::move(x1));
  AddInPlace(s->x1, s->x);
  s->rstd2.resize(nl);
  s->c.resize(nl * h);
  RmsNormForward(s->x1.data(), w_.ffn_norm, s->c.data(), s->rstd2.data(), nl, h, d_.norm_eps);
  const kernels::HostBuffer<T> c_all = d_.sp ? GatherSequence(s->c) : kernels::HostBuffer<T>();
  const T* c = d_.sp ? c_all.data() : s->c.data();
  s->gate.resize(n * f);
  s->up.resize(n * f);
  LinearForward(c, w_.w1, s->gate.data(), {n, h, f});
  LinearForward(c, w_.w3, s->up.data(), {n, h, f});
  s->z.resize(n * f);
  SwiGluForward(s->gate.data(), s->up.data(), s->z.data(), n * f);
  kernels::HostBuffer<T> y(n * h);
  LinearForward(s->z.data(), w_.w2, y.data(), {n, f, h});
  y = ScatterSequence(std::move(y));  // row-parallel w2 (g)
  AddInPlace(y, s->x1);
  return y;
}

template <typename T>
kernels::HostBuffer<T> TransformerBlock<T>::BackwardInput(kernels::HostBuffer<T> dy, BlockSaved<T>* s) const {
  Rebuild(s);
  const int64_t n = d_.tokens(), nl = d_.local_tokens(), h = d_.hidden, hq = d_.local_width(),
                hkv = d_.local_kv_width(), f = d_.local_ffn();
  const AttentionDims ad = d_.attention();
  // MLP: y = x1 + W2 swiglu(W1 c, W3 c), c = norm(x1).
  kernels::HostBuffer<T> dz(n * f);
  {
    const kernels::HostBuffer<T> dy_all = d_.sp ? GatherSequence(dy) : kernels::HostBuffer<T>();
    LinearBackwardInput(d_.sp ? dy_all.data() : dy.data(), w_.w2, dz.data(), {n, f, h}, false);
  }
  s->dgate.resize(n * f);
  s->dup.resize(n * f);
  SwiGluBackward(dz.data(), s->gate.data(), s->up.data(), s->dgate.data(), s->dup.data(), n * f);
  Free(dz);
  Free(s->gate);
  Free(s->up);
  kernels::HostBuffer<T> dc(n * h);
  LinearBackwardInput(s->dgate.data(), w_.w1, dc.data(), {n, h, f}, false);
  LinearBackwardInput(s->dup.data(), w_.w3, dc.data(), {n, h, f}, true);
  s->dc = ScatterSequence(std::move(dc));  // column-parallel w1, w3: f's backward
  s->dx1 = dy;  // residual path
  RmsNormBackwardInput(s->dc.data(), s->x1.data(), w_.ffn_norm, s->rstd2.data(), s->dx1.data(), nl,
                       h, true);
  s->dy = std::move(dy);
  // Attention: x1 = x + Wo attn(rope(Wq a), rope(Wk a), Wv a), a = norm(x).
  kernels::HostBuffer<T> dout(n * hq);
  {
    const kernels::HostBuffer<T> dx1_all = d_.sp ? GatherSequence(s->dx1) : kernels::HostBuffer<T>();
    LinearBackwardInput(d_.sp ? dx1_all.data() : s->dx1.data(), w_.wo, dout.data(), {n, hq, h}, false);
  }
  s->dq.resize(n * hq);
  s->dk.resize(n * hkv);
  s->dv.resize(n * hkv);
  AttentionBackward(dout.data(), s->q.data(), s->k.data(), s->v.data(), s->probs.data(),
                    s->dq.data(), s->dk.data(), s->dv.data(), ad);
  Free(dout);
  Free(s->q);
  Free(s->k);
  Free(s->v);
  Free(s->probs);
  RopeBackward(s->dq.data(), *rope_, d_.batch, d_.local_heads());
  RopeBackward(s->dk.data(), *rope_, d_.batch, d_.local_kv_heads());
  kernels::HostBuffer<T> da(n * h);
  LinearBackwardInput(s->dq.data(), w_.wq, da.data(), {n, h, hq}, false);
  LinearBackwardInput(s->dk.data(), w_.wk, da.data(), {n, h, hkv}, true);
  LinearBackwardInput(s->dv.data(), w_.wv, da.data(), {n, h, hkv}, true);
  s->da = ScatterSequence(std::move(da));  // column-parallel wq, wk, wv: f's backward
  kernels::HostBuffer<T> dx = s->dx1;  // residual path
  RmsNormBackwardInput(s->da.data(), s->x.data(), w_.attention_norm, s->rstd1.data(), dx.data(), nl,
                       h, true);
  return dx;
}

template <typename T>
void TransformerBlock<T>::BackwardWeight(BlockSaved<T>* s) const {
  // Without sequence parallelism no communication: each rank's weight slices from its own
  // activations and gradients; the norm gains' gradients come from tensors every rank holds whole
  // (dc, da, x, x1). With it, the shards kept are gathered again (dy, c, dx1, a, in this order on
  // every rank) and the norm gains' gradients cover this rank's tokens only.
  const int64_t n = d_.tokens(), nl = d_.local_tokens(), h = d_.hidden, hq = d_.local_width(),
                hkv = d_.local_kv_width(), f = d_.local_ffn();
  auto all = [&](const kernels::HostBuffer<T>& shard, kernels::HostBuffer<T>* keep) {
    if (!d_.sp) return shard.data();
    *keep = GatherSequence(shard);
    return static_cast<const T*>(keep->data());
  };
  kernels::HostBuffer<T> gathered;
  LinearBackwardWeight(all(s->dy, &gathered), s->z.data(), g_.w2, {n, f, h});
  const T* c = all(s->c, &gathered);
  LinearBackwardWeight(s->dgate.data(), c, g_.w1, {n, h, f});
  LinearBackwardWeight(s->dup.data(), c, g_.w3, {n, h, f});
  RmsNormBackwardWeight(s->dc.data(), s->x1.data(), s->rstd2.data(), g_.ffn_norm, nl, h);
  LinearBackwardWeight(all(s->dx1, &gathered), s->o.data(), g_.wo, {n, hq, h});
  const T* a = all(s->a, &gathered);
  LinearBackwardWeight(s->dq.data(), a, g_.wq, {n, h, hq});
  LinearBackwardWeight(s->dk.data(), a, g_.wk, {n, h, hkv});
  LinearBackwardWeight(s->dv.data(), a, g_.wv, {n, h, hkv});
  AddBiasGrad(s->dq.data(), g_.bq, n, hq);
  AddBiasGrad(s->dk.data(), g_.bk, n, hkv);
  AddBiasGrad(s->dv.data(), g_.bv, n, hkv);
  RmsNormBackwardWeight(s->da.data(), s->x.data(), s->rstd1.data(), g_.attention_norm, nl, h);
  *s = BlockSaved<T>();
}

template <typename T>
kernels::HostBuffer<T> TransformerBlock<T>::BackwardFused(kernels::HostBuffer<T> dy, BlockSaved<T>* s) const {
  if (d_.sp) {  // the shards' gathers are B's and W's; one after the other
    kernels::HostBuffer<T> dx = BackwardInput(std::move(dy), s);
    BackwardWeight(s);
    return dx;
  }
  Rebuild(s);
  const int64_t n = d_.tokens(), h = d_.hidden, hq = d_.local_width(), hkv = d_.local_kv_width(),
                f = d_.local_ffn();
  const AttentionDims ad = d_.attention();
  // Down projection.
  kernels::HostBuffer<T> dz(n * f);
  LinearBackwardInput(dy.data(), w_.w2, dz.data(), {n, f, h}, false);
  LinearBackwardWeight(dy.data(), s->z.data(), g_.w2, {n, f, h});
  // SwiGLU and the gate/up projections.
  kernels::HostBuffer<T> dgate(n * f), dup(n * f);
  SwiGluBackward(dz.data(), s->gate.data(), s->up.data(), dgate.data(), dup.data(), n * f);
  kernels::HostBuffer<T> dc(n * h);
  LinearBackwardInput(dgate.data(), w_.w1, dc.data(), {n, h, f}, false);
  LinearBackwardWeight(dgate.data(), s->c.data(), g_.w1, {n, h, f});
  LinearBackwardInput(dup.data(), w_.w3, dc.data(), {n, h, f}, true);
  LinearBackwardWeight(dup.data(), s->c.data(), g_.w3, {n, h, f});
  ReduceFromTensorParallel(dc);
  // ffn_norm and the residual.
  kernels::HostBuffer<T> dx1 = dy;
  RmsNormBackwardInput(dc.data(), s->x1.data(), w_.ffn_norm, s->rstd2.data(), dx1.data(), n, h,
                       true);
  RmsNormBackwardWeight(dc.data(), s->x1.data(), s->rstd2.data(), g_.ffn_norm, n, h);
  // Output projection.
  kernels::HostBuffer<T> dout(n * hq);
  LinearBackwardInput(dx1.data(), w_.wo, dout.data(), {n, hq, h}, false);
  LinearBackwardWeight(dx1.data(), s->o.data(), g_.wo, {n, hq, h});
  // Attention, RoPE and the q, k, v projections.
  kernels::HostBuffer<T> dq(n * hq), dk(n * hkv), dv(n * hkv);
  AttentionBackward(dout.data(), s->q.data(), s->k.data(), s->v.data(), s->probs.data(), dq.data(),
                    dk.data(), dv.data(), ad);
  RopeBackward(dq.data(), *rope_, d_.batch, d_.local_heads());
  RopeBackward(dk.data(), *rope_, d_.batch, d_.local_kv_heads());
  kernels::HostBuffer<T> da(n * h);
  LinearBackwardInput(dq.data(), w_.wq, da.data(), {n, h, hq}, false);
  LinearBackwardWeight(dq.data(), s->a.data(), g_.wq, {n, h, hq});
  LinearBackwardInput(dk.data(), w_.wk, da.data(), {n, h, hkv}, true);
  LinearBackwardWeight(dk.data(), s->a.data(), g_.wk, {n, h, hkv});
  LinearBackwardInput(dv.data(), w_.wv, da.data(), {n, h, hkv}, true);
  LinearBackwardWeight(dv.data(), s->a.data(), g_.wv, {n, h, hkv});
  AddBiasGrad(dq.data(), g_.bq, n, hq);
  AddBiasGrad(dk.data(), g_.bk, n, hkv);
  AddBiasGrad(dv.data(), g_.bv, n, hkv);
  ReduceFromTensorParallel(da);
  // attention_norm and the residual.
  kernels::HostBuffer<T> dx = dx1;
  RmsNormBackwardInput(da.data(), s->x.data(), w_.attention_norm, s->rstd1.data(), dx.data(), n, h,
                       true);
  RmsNormBackwardWeight(da.data(), s->x.data(), s->rstd1.data(), g_.attention_norm, n, h);
  *s = BlockSaved<T>();
  return dx;
}

template struct BlockSaved<float>;
template struct BlockSaved<double>;
template class TransformerBlock<float>;
template class TransformerBlock<double>;

}  // namespace pipecoord::model
