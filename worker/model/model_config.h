// ModelConfig: the shape of the Llama-style decoder the workers train (proto ModelSpec's
// fields), and BatchShape: how much data one optimizer step sees.
#ifndef PIPECOORD_WORKER_MODEL_MODEL_CONFIG_H_
#define PIPECOORD_WORKER_MODEL_MODEL_CONFIG_H_

#include <cstdint>

#include "common/status.h"
#include "kernels/cpu/rotary.h"

namespace pipecoord::model {

// RMSNorm's epsilon and RoPE's base by default (Llama's values); a Hugging Face config may set
// others (ModelConfig::rms_norm_eps, rope_theta).
inline constexpr double kRmsNormEps = 1e-5;
inline constexpr double kRopeBase = 10000.0;

struct ModelConfig {
  int layers = 0;      // transformer blocks, > 0
  int hidden = 0;      // model width h, > 0, a multiple of heads
  int ffn_hidden = 0;  // SwiGLU inner width; 0 means FfnHidden()'s default rule
  int heads = 0;       // attention heads; hidden / heads must be even (RoPE rotates pairs)
  int vocab = 0;       // vocabulary size, > 0
  int seq_len = 0;     // tokens per sample s, > 0
  uint64_t seed = 0;   // initial weights (and the synthetic data) come from this seed
  double rms_norm_eps = kRmsNormEps;  // > 0
  double rope_theta = kRopeBase;      // > 0
  kernels::cpu::RopeScaling rope_scaling{};  // Llama 3's (factor 0: none)
  // Key/value heads (grouped-query attention; last, so {layers, hidden, ...} reads as before);
  // 0: heads. Divides heads.
  int kv_heads = 0;
  bool qkv_bias = false;  // the q, k, v projections add a bias (Qwen2)
  int sliding_window = 0;  // attention sees the last sliding_window tokens only (Mistral); 0: all
  // The LM head's matrix is the token embedding's (stage_model.h says how stages share it).
  bool tied_embeddings = false;
  int head_dim = 0;  // features per head d; 0: hidden / heads (q and o are heads x d wide)

  // ffn_hidden if set, else ceil(8h/3) rounded up to a multiple of 64 (as proto/job.proto says).
  int FfnHidden() const;
  int HeadDim() const { return head_dim > 0 ? head_dim : heads > 0 ? hidden / heads : 0; }
  int QWidth() const { return heads * HeadDim(); }  // rows of wq, columns of wo
  int KvHeads() const { return kv_heads > 0 ? kv_heads : heads; }
  int KvWidth() const { return KvHeads() * HeadDim(); }  // rows of wk and wv
  // Names the first field that breaks its rule: "hidden: must be a multiple of heads (3), got 32".
  Status Validate() const;
};

struct BatchShape {
  int micro_batch_size = 1;  // samples per micro-batch b >= 1
  int microbatches = 1;      // micro-batches per optimizer step m >= 1

  Status Validate() const;
};

// INVALID_ARGUMENT naming the field unless tp >= 1 divides heads, kv_heads, ffn_hidden and vocab: each
// tensor-parallel rank holds an equal slice (the CPU and CUDA stage models' rule).
Status CheckTensorParallel(const ModelConfig& config, int tp);

}  // namespace pipecoord::model

#endif  // PIPECOORD_WORKER_MODEL_MODEL_CONFIG_H_
