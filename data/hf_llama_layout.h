// How pipecoord's Llama-style model and a Hugging Face LlamaForCausalLM name and lay out the same
// weights. Pure: names, shapes and one row permutation.
//
//   pipecoord                          Hugging Face                                 shape [out, in]
//   tok_embeddings.weight              model.embed_tokens.weight                    [vocab, h]
//   layers.N.attention_norm.weight     model.layers.N.input_layernorm.weight        [h]
//   layers.N.attention.wq.weight       model.layers.N.self_attn.q_proj.weight       [a d, h] rows permuted
//   layers.N.attention.wk.weight       model.layers.N.self_attn.k_proj.weight       [g d, h] rows permuted
//   layers.N.attention.wv.weight       model.layers.N.self_attn.v_proj.weight       [g d, h]
//   layers.N.attention.wo.weight       model.layers.N.self_attn.o_proj.weight       [h, a d]
//   layers.N.ffn_norm.weight           model.layers.N.post_attention_layernorm.weight [h]
//   layers.N.feed_forward.w1.weight    model.layers.N.mlp.gate_proj.weight          [ffn, h]
//   layers.N.feed_forward.w3.weight    model.layers.N.mlp.up_proj.weight            [ffn, h]
//   layers.N.feed_forward.w2.weight    model.layers.N.mlp.down_proj.weight          [h, ffn]
//   norm.weight                        model.norm.weight                            [h]
//   output.weight                      lm_head.weight                               [vocab, h]
//
// Tied embeddings (tie_word_embeddings): no lm_head.weight in the files, as transformers'
// save_pretrained writes them; output.weight (a head stage's copy of the embedding) reads
// model.embed_tokens.weight.
//
// (a heads and g key/value heads of d features, d = h / a unless the config gives head_dim: a d = h
// and g d = h without either.) With
// qkv_bias, layers.N.attention.w{q,k,v}.bias = self_attn.{q,k,v}_proj.bias, [a d], [g d], [g d]; q's
// and k's rows permuted as their weights' are.
//
// Both store a Linear's weight as [out, in] (y = x W^T), so matrices map element for element,
// except one thing: rotary embeddings. Our kernel (kernels/cpu/rotary.h, Meta's original Llama
// code) rotates interleaved pairs (x[2i], x[2i+1]) of each head; transformers' Llama rotates
// (x[i], x[i + d/2]) ("rotate_half"), with the same angle pos * theta^(-2i/d) for pair i. Both
// compute the same attention scores when q_proj's and k_proj's output rows are permuted within
// each head: our row 2i is HF's row i and our row 2i+1 is HF's row i + d/2 (the inverse of the
// permutation transformers' convert_llama_weights_to_hf.py applies to Meta's checkpoints).
// Import applies HfRotaryToInterleaved, export InterleavedRotaryToHf; v_proj, o_proj and the
// rest are unchanged. Scores are dot products over the head's dimensions, so the order of
// dimensions inside a head does not change them once q and k agree.
#ifndef PIPECOORD_DATA_HF_LLAMA_LAYOUT_H_
#define PIPECOORD_DATA_HF_LLAMA_LAYOUT_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pipecoord::data {

// The model's dimensions (a ModelSpec's, in plain values).
struct LlamaShape {
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t ffn = 0;
  int64_t vocab = 0;
  int64_t kv_heads = 0;  // key/value heads (grouped-query attention); 0: heads
  bool qkv_bias = false;  // q_proj, k_proj, v_proj have biases (Qwen2): [h], [g d], [g d]
  bool tied_embeddings = false;  // no lm_head.weight: the head is model.embed_tokens.weight
  int64_t head_dim = 0;  // features per head d (config.json's head_dim); 0: hidden / heads

  int64_t d() const { return head_dim > 0 ? head_dim : hidden / heads; }
  int64_t q_width() const { return heads * d(); }  // q_proj's rows, o_proj's columns
  int64_t kv_width() const { return (kv_heads > 0 ? kv_heads : heads) * d(); }
};

struct HfTensorInfo {
  std::string hf_name;
  std::string our_name;
  std::vector<uint64_t> shape;  // [out, in] or [h]
  bool rotary_rows = false;     // q_proj / k_proj: rows permuted between the layouts
};

// Every tensor of the model's files, in model order (embedding, layers, norm, head unless tied).
std::vector<HfTensorInfo> HfLlamaTensors(const LlamaShape& shape);

// Name maps; INVALID_ARGUMENT naming the tensor when it is not one of the table's.
Result<std::string> HfNameOf(std::string_view our_name);
Result<std::string> OurNameOf(std::string_view hf_name);
// Buffers transformers saved in old checkpoints that are not weights (rotary_emb.inv_freq: the
// frequencies come from rope_theta); loading ignores them.
bool IsDerivedHfBuffer(std::string_view hf_name);
// q_proj and k_proj, weights and biases (by Hugging Face name): their rows are permuted between
// the layouts.
bool HasRotaryRows(std::string_view hf_name);

// Permutes the rows of a q_proj / k_proj weight [heads * head_dim, cols] (k_proj: its key/value
// heads) between the layouts (see above), head by head. `in` and `out` must not overlap and hold
// rows * cols values.
void HfRotaryToInterleaved(std::span<const float> hf, std::span<float> ours, int64_t head_dim, int64_t cols);
void InterleavedRotaryToHf(std::span<const float> ours, std::span<float> hf, int64_t head_dim, int64_t cols);

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_HF_LLAMA_LAYOUT_H_
