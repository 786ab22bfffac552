// TransformerBlock: one Llama-style decoder block with its backward split for zero-bubble
// pipelines.
//
//   a = RMSNorm(x; attention_norm)       q, k, v = a Wq^T, a Wk^T, a Wv^T; RoPE on q and k
//   x1 = x + Attention(q, k, v) Wo^T     (causal, multi-head; grouped-query when kv_heads < heads)
//   c = RMSNorm(x1; ffn_norm)            y = x1 + (silu(c W1^T) * (c W3^T)) W2^T
//
// Forward keeps what the backward needs in a BlockSaved (one per micro-batch, owned by the
// caller). BackwardInput (B) computes the input gradient, frees what only B needed (q, k, v,
// attention probabilities, the SwiGLU inputs) and keeps the layer inputs and output gradients
// the weight gradients need. BackwardWeight (W) accumulates every weight gradient and frees the
// rest. BackwardFused is the one-pass baseline (each op's weight gradient right after its input
// gradient); it gives bit-identical results to B then W.
//
// T is float (the model) or double (finite-difference tests). Tensors are [tokens, features]
// row-major with tokens = batch * seq. The block does not own its weights or gradients; it
// reads the weights at call time, so optimizer updates between calls are seen.
//
// Activation recompute (dims.recompute, Korthikanti et al. 2022): kSelective drops the attention
// core's probabilities at the end of F and recomputes the core from the saved q, k, v at the
// start of B (and of the fused BW); kFull keeps only the block input x after F and runs F again
// at the start of B (with tp > 1 its two all-reduces too). B, W and the fused BW then see what
// they see without recompute, so every result is bit for bit the same; recompute_ns() counts the
// time spent rebuilding.
//
// Tensor parallelism (dims.tp > 1, Megatron-LM's split; float only): the block holds this rank's
// slices: wq, wk, wv column-parallel (its heads' output rows), wo row-parallel (those heads'
// input columns), w1, w3 column-parallel and w2 row-parallel over the SwiGLU width; the norm
// gains whole. F sums the row-parallel outputs over the group after wo and after w2 (Megatron's
// g); B sums the column-parallel layers' input gradients before each norm's backward (f's
// backward); W needs no communication (the norms' gradients come from tensors every rank holds
// whole), so zero-bubble schedules keep their B/W split. 4 all-reduces of tokens x hidden per
// block and micro-batch, 2 in F and 2 in B. x, y, dy, dx stay whole on every rank. The block
// takes the group's TensorParallel (worker/parallel/tensor_parallel.h), whose errors are sticky:
// the caller checks its status() after each call.
//
// Sequence parallelism (dims.sp, Korthikanti et al. 2022): x, y, dx, dy, the norms and the
// residual adds are this rank's 1/tp of the tokens. F all-gathers each norm's output before its
// tensor-parallel region and reduce-scatters the region's output (g) instead of all-reducing it;
// B all-gathers the output gradient before each region (dy, dx1) and reduce-scatters the
// column-parallel layers' input gradient (f's backward). Only the shards are kept for W (a, c,
// dy, dx1: memory/'s pipecoord-cpu recipe counts T h / tp each), so W gathers them again: 4
// all-gathers in W, and zero-bubble schedules keep their B/W split with W communicating (every
// rank of the group runs its W's in the same order). The norm gains' gradients are then partial
// sums over this rank's tokens; StageModel sums them over the group before the optimizer step.
// Bytes per block and micro-batch: 4 all-gathers and 4 reduce-scatters of T h floats in F and B
// (as many bytes as the 4 all-reduces without it), plus 4 all-gathers in W. The fused BW is B
// then W.
#ifndef PIPECOORD_WORKER_MODEL_TRANSFORMER_BLOCK_H_
#define PIPECOORD_WORKER_MODEL_TRANSFORMER_BLOCK_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/rotary.h"
#include "kernels/host_pool.h"
#include "worker/parallel/tensor_parallel.h"

namespace pipecoord::model {

enum class Recompute { kNone, kSelective, kFull };

// JobSpec.recompute's value (validated: "", "none", "selective" or "full"; anything else is none).
inline Recompute RecomputeOf(std::string_view name) {
  if (name == "full") return Recompute::kFull;
  if (name == "selective") return Recompute::kSelective;
  return Recompute::kNone;
}

struct BlockDims {
  int64_t batch = 0;   // samples per micro-batch
  int64_t seq = 0;     // tokens per sample
  int64_t hidden = 0;  // model width h
  int64_t heads = 0;   // attention heads (head_dim(): hidden / heads unless explicit_head_dim)
  int64_t ffn = 0;     // SwiGLU inner width
  double norm_eps = 1e-5;  // both RMSNorms' epsilon (ModelConfig::rms_norm_eps)
  int64_t tp = 1;          // tensor-parallel degree; divides heads, kv heads and ffn
  Recompute recompute = Recompute::kNone;
  // Sequence parallelism (tp > 1): x, y, dx, dy and everything outside the tensor-parallel regions
  // are this rank's shard of the tokens, rows [r T/tp, (r+1) T/tp) of [tokens, h].
  bool sp = false;
  // Key/value heads (grouped-query attention; last, so that {b, s, h, heads, ffn} still reads as
  // before); 0: heads. Divides heads; tp divides it.
  int64_t kv_heads = 0;
  int64_t window = 0;  // sliding-window attention (kernels/cpu/attention.h); 0: none
  int64_t explicit_head_dim = 0;  // features per head when not hidden / heads (Mistral NeMo); 0: hidden / heads

  int64_t tokens() const { return batch * seq; }
  int64_t local_tokens() const { return sp ? tokens() / tp : tokens(); }
  int64_t local_heads() const { return heads / tp; }
  int64_t local_width() const { return local_heads() * head_dim(); }  // this rank's q and o features
  int64_t head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : hidden / heads; }
  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t local_kv_heads() const { return kv() / tp; }
  int64_t local_kv_width() const { return local_kv_heads() * head_dim(); }  // this rank's k and v features
  // The attention core's shape on this rank: its query heads and the key/value heads they read.
  kernels::cpu::AttentionDims attention() const {
    return {batch, seq, local_heads(), head_dim(), local_kv_heads(), window};
  }
  int64_t local_ffn() const { return ffn / tp; }
};

// The nine tensors of a block (weights with P = const T, gradients with P = T). Shapes:
// attention_norm, ffn_norm [h]; wq, wo [h, h]; wk, wv [g d, h] (g key/value heads of d = h / heads
// features; g d = h without grouped-query attention); w1 (gate), w3 (up) [ffn, h]; w2 [h, ffn].
// Optional biases bq [h], bk, bv [g d] (added to the projections' outputs before RoPE; their
// gradients, the column sums of dq, dk, dv, come in W).
// With tp > 1 a rank's slices: wq [h/tp, h]; wk, wv [g d/tp, h]; wo [h, h/tp]; w1, w3 [ffn/tp, h];
// w2 [h, ffn/tp] (TensorParallelSlice in weight_init.h cuts them from the whole tensors).
template <typename P>
struct BlockTensors {
  P* attention_norm = nullptr;
  P* wq = nullptr;
  P* wk = nullptr;
  P* wv = nullptr;
  P* wo = nullptr;
  P* ffn_norm = nullptr;
  P* w1 = nullptr;
  P* w2 = nullptr;
  P* w3 = nullptr;
  // The q, k, v projections' biases (Qwen2), this rank's rows of each; null: none.
  P* bq = nullptr;
  P* bk = nullptr;
  P* bv = nullptr;
};

// What one micro-batch keeps between F, B and W. Empty vectors are not held.
template <typename T>
struct BlockSaved {
  // From F. x, rstd1, a, o, x1, rstd2, c, z live until W; the rest until B.
  kernels::HostBuffer<T> x, rstd1, a, q, k, v, probs, o, x1, rstd2, c, gate, up, z;
  // From B for W: the output gradients of each weight-carrying op.
  kernels::HostBuffer<T> dy, dgate, dup, dc, dx1, dq, dk, dv, da;

  int64_t Bytes() const;
};

template <typename T>
class TransformerBlock {
 public:
  // rope must cover dims.seq positions of head_dim = hidden / heads. tp: the group's collectives
  // when dims.tp > 1 (its size() == dims.tp; float blocks only), else null.
  TransformerBlock(const BlockDims& dims, BlockTensors<const T> weights, BlockTensors<T> grads,
                   std::shared_ptr<const kernels::cpu::RopeTable> rope,
                   worker::parallel::TensorParallel* tp = nullptr);

  // F: returns y [tokens, h] for x [tokens, h] (moved into saved). saved must be empty.
  kernels::HostBuffer<T> Forward(kernels::HostBuffer<T> x, BlockSaved<T>* saved) const;
  // B: returns dx for dy (both [tokens, h]); saved must hold a Forward's state.
  kernels::HostBuffer<T> BackwardInput(kernels::HostBuffer<T> dy, BlockSaved<T>* saved) const;
  // W: adds this micro-batch's weight gradients to grads; saved must hold a B's state and is
  // empty afterwards.
  void BackwardWeight(BlockSaved<T>* saved) const;
  // BW baseline in one pass: same dx and gradients as BackwardInput + BackwardWeight, bit for bit.
  kernels::HostBuffer<T> BackwardFused(kernels::HostBuffer<T> dy, BlockSaved<T>* saved) const;

  const BlockDims& dims() const { return d_; }
  void set_recompute(Recompute r) { d_.recompute = r; }
  // Where W adds the weight gradients from now on (ZeRO-2 allocates them again each step).
  void set_grads(BlockTensors<T> grads) { g_ = grads; }
  // Nanoseconds spent in B and BW rebuilding what F dropped, since construction.
  int64_t recompute_ns() const { return recompute_ns_; }

 private:
  // Sequence parallelism's mapping points (no-ops without it): all the tokens from this rank's
  // shard, and this rank's shard of the group's sum of `partial`.
  kernels::HostBuffer<T> GatherSequence(const kernels::HostBuffer<T>& shard) const;
  kernels::HostBuffer<T> ScatterSequence(kernels::HostBuffer<T> partial) const;
  // F without dropping anything (Forward, and full recompute's rebuild).
  kernels::HostBuffer<T> ForwardAll(kernels::HostBuffer<T> x, BlockSaved<T>* saved) const;
  // Before B or BW: rebuild what recompute dropped.
  void Rebuild(BlockSaved<T>* saved) const;
  void ReduceFromTensorParallel(kernels::HostBuffer<T>& partial) const;

  BlockDims d_;
  BlockTensors<const T> w_;
  BlockTensors<T> g_;
  std::shared_ptr<const kernels::cpu::RopeTable> rope_;
  worker::parallel::TensorParallel* tp_;
  mutable int64_t recompute_ns_ = 0;
};

extern template struct BlockSaved<float>;
extern template struct BlockSaved<double>;
extern template class TransformerBlock<float>;
extern template class TransformerBlock<double>;

}  // namespace pipecoord::model

#endif  // PIPECOORD_WORKER_MODEL_TRANSFORMER_BLOCK_H_
