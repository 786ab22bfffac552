// Causal multi-head self-attention: plain softmax attention that materialises the s x s
// probabilities (no flash tiling), the reference the CUDA kernels are checked against.
//
// Layouts (row-major): q, o and their gradients [batch, seq, heads, head_dim], which is the
// [tokens, hidden] layout of the projections; k, v and theirs [batch, seq, kv_heads, head_dim]
// (grouped-query attention: query head h reads key/value head h / (heads / kv_heads); without
// GQA kv_heads is heads and the layouts agree; dk and dv sum over each group's query heads, in
// head order); probs [batch, heads, seq, seq] with zeros
// above the diagonal. Scores are scaled by 1/sqrt(head_dim). The fp32 path runs per-head sgemm
// over the causal lower block triangle only (blocks of 32 queries/keys; attention.cc), softmax
// sums in double; T = double runs attention_reference.h. Attention has no weights, so its
// backward is all B. No buffer may alias another.
#ifndef PIPECOORD_KERNELS_CPU_ATTENTION_H_
#define PIPECOORD_KERNELS_CPU_ATTENTION_H_

#include <cstdint>

namespace pipecoord::kernels::cpu {

struct AttentionDims {
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;
  int64_t kv_heads = 0;  // key/value heads (grouped-query attention); 0: heads. Must divide heads.
  // Sliding-window attention (Mistral's, Qwen2's): query i sees keys j with i - window < j <= i;
  // 0: every earlier key (plain causal attention).
  int64_t window = 0;

  int64_t hidden() const { return heads * head_dim; }
  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t kv_hidden() const { return kv() * head_dim; }
  int64_t group() const { return heads / kv(); }  // query heads per key/value head
  int64_t probs_size() const { return batch * heads * seq * seq; }
  // The first key query i sees.
  int64_t first_key(int64_t i) const { return window > 0 && i >= window ? i - window + 1 : 0; }
};

// F: probs[b, h, i, j] = softmax over first_key(i) <= j <= i of (q_i . k_j / sqrt(d)), 0 for the
// other j, and o_i = sum_j probs[i, j] v_j.
// Overwrites probs (kept for backward) and o.
template <typename T>
void AttentionForward(const T* q, const T* k, const T* v, T* probs, T* o, const AttentionDims& d);

// B: overwrites dq, dk, dv from dout, the forward inputs and the saved probs.
template <typename T>
void AttentionBackward(const T* dout, const T* q, const T* k, const T* v, const T* probs, T* dq,
                       T* dk, T* dv, const AttentionDims& d);

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_ATTENTION_H_
