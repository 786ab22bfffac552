// The `eager` recipe: a Llama block run op by op in a framework's eager mode, as Hugging Face
// transformers' LlamaDecoderLayer (attn_implementation="eager") and PaddleNLP's Llama do it.
//
// RMSNorm is unfused: it upcasts its input to fp32 (kept by pow and the multiply), keeps the
// per-token rsqrt and the normalized bf16 tensor (kept by the weight multiply). RoPE keeps only
// cos and sin (its backward multiplies by them; they need no gradient, so q and k are not kept:
// measured on transformers' own layer, tests/memory_peers). Eager attention keeps the fp32
// softmax output and its bf16 copy (both s x s per head); flash attention's output is the
// storage o_proj saves (the kernels lay it out [b, s, a, d]; the transpose before o_proj is a view). SwiGLU is unfused: gate output (SiLU), SiLU output and up output
// (the product) and the product (down projection). docs/memory.md derives every entry.
#include "memory/recipe.h"

namespace pipecoord::memory {

const Recipe& EagerRecipe() {
  static const Recipe kRecipe = {
      "eager",
      "framework eager ops (Hugging Face / PaddleNLP Llama): unfused RMSNorm, RoPE and SwiGLU",
      // layer
      {
          {"input_norm.input_fp32", "input_norm", "fp32 copy of the block input, saved by pow and x * rsqrt",
           {"s", "b", "h"}, ElemType::kFp32, kSeqSplit, "norm=rmsnorm", 0},
          {"input_norm.rstd", "input_norm", "per-token rsqrt(mean(x^2) + eps)",
           {"s", "b", "1"}, ElemType::kFp32, kSeqSplit, "norm=rmsnorm", 0},
          {"input_norm.normalized", "input_norm", "normalized input cast back, saved by the weight multiply",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "norm=rmsnorm", 0},
          {"input_norm.input", "input_norm", "block input, saved by layer_norm",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "norm=layernorm", 0},
          {"input_norm.mean_rstd", "input_norm", "per-token mean and rstd, saved by layer_norm",
           {"s", "b", "2"}, ElemType::kFp32, kSeqSplit, "norm=layernorm", 0},
          {"attention.qkv_input", "attention", "norm output, saved by q_proj, k_proj, v_proj",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", kWeightInput},
          {"attention.q_embed", "attention", "query after RoPE, saved by QK^T or flash attention",
           {"s", "b", "a*d"}, ElemType::kAct, 2, "", 0},
          {"attention.k_repeated", "attention", "key after RoPE, repeated to every head, saved by QK^T",
           {"s", "b", "a*d"}, ElemType::kAct, 2, "attention=eager", 0},
          {"attention.softmax_fp32", "attention", "s x s probabilities in fp32, saved by softmax",
           {"b", "a", "s", "s"}, ElemType::kFp32, 1, "attention=eager", kSelective},
          {"attention.probs", "attention", "probabilities cast back, saved by probs x V",
           {"b", "a", "s", "s"}, ElemType::kAct, 1, "attention=eager", kSelective},
          {"attention.probs_dropout_mask", "attention", "attention dropout mask",
           {"b", "a", "s", "s"}, ElemType::kU8, 1, "attention=eager,dropout", kSelective},
          {"attention.v_repeated", "attention", "value repeated to every head, saved by probs x V",
           {"s", "b", "a*d"}, ElemType::kAct, 2, "attention=eager", 0},
          {"attention.k_embed", "attention", "key after RoPE (g groups), saved by flash attention",
           {"s", "b", "g*d"}, ElemType::kAct, 2, "attention=flash", 0},
          {"attention.v", "attention", "value (g groups), saved by flash attention",
           {"s", "b", "g*d"}, ElemType::kAct, 2, "attention=flash", 0},
          {"attention.flash_lse", "attention", "per-row log-sum-exp, saved by flash attention",
           {"b", "a", "s"}, ElemType::kFp32, 1, "attention=flash", 0},
          {"attention.o_proj_input", "attention",
           "context made contiguous, saved by o_proj (flash: the kernel's output, which its backward saves too)",
           {"s", "b", "a*d"}, ElemType::kAct, 2, "", kWeightInput},
          {"attention.dropout_mask", "dropout_add", "residual dropout mask after attention",
           {"s", "b", "h"}, ElemType::kU8, kSeqSplit, "dropout", 0},
          {"post_attention_norm.input_fp32", "post_attention_norm", "fp32 copy of the residual sum",
           {"s", "b", "h"}, ElemType::kFp32, kSeqSplit, "norm=rmsnorm", 0},
          {"post_attention_norm.rstd", "post_attention_norm", "per-token rsqrt",
           {"s", "b", "1"}, ElemType::kFp32, kSeqSplit, "norm=rmsnorm", 0},
          {"post_attention_norm.normalized", "post_attention_norm", "normalized, saved by the weight multiply",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "norm=rmsnorm", 0},
          {"post_attention_norm.input", "post_attention_norm", "residual sum, saved by layer_norm",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "norm=layernorm", 0},
          {"post_attention_norm.mean_rstd", "post_attention_norm", "per-token mean and rstd",
           {"s", "b", "2"}, ElemType::kFp32, kSeqSplit, "norm=layernorm", 0},
          {"mlp.input", "mlp", "norm output, saved by gate_proj and up_proj (or fc1)",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", kWeightInput},
          {"mlp.gate_output", "mlp", "gate_proj output, saved by SiLU",
           {"s", "b", "f"}, ElemType::kAct, 2, "mlp=swiglu", 0},
          {"mlp.silu_output", "mlp", "SiLU(gate), saved by the product",
           {"s", "b", "f"}, ElemType::kAct, 2, "mlp=swiglu", 0},
          {"mlp.up_output", "mlp", "up_proj output, saved by the product",
           {"s", "b", "f"}, ElemType::kAct, 2, "mlp=swiglu", 0},
          {"mlp.gelu_input", "mlp", "fc1 output, saved by GeLU",
           {"s", "b", "f"}, ElemType::kAct, 2, "mlp=gelu", 0},
          {"mlp.down_input", "mlp", "activation output, saved by down_proj (fc2)",
           {"s", "b", "f"}, ElemType::kAct, 2, "", kWeightInput},
          {"mlp.dropout_mask", "dropout_add", "residual dropout mask after the MLP",
           {"s", "b", "h"}, ElemType::kU8, kSeqSplit, "dropout", 0},
      },
      // full_recompute
      {
          {"block.input", "checkpoint", "block input, kept by gradient checkpointing",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
      },
      // w_grads
      {
          {"grad.q_output", "w_grads", "gradient of q_proj's output",
           {"s", "b", "a*d"}, ElemType::kAct, 2, "", 0},
          {"grad.kv_output", "w_grads", "gradients of k_proj's and v_proj's outputs",
           {"s", "b", "2*g*d"}, ElemType::kAct, 2, "", 0},
          {"grad.o_output", "w_grads", "gradient of o_proj's output",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
          {"grad.gate_up_output", "w_grads", "gradients of gate_proj's and up_proj's outputs",
           {"s", "b", "2*f"}, ElemType::kAct, 2, "mlp=swiglu", 0},
          {"grad.fc1_output", "w_grads", "gradient of fc1's output",
           {"s", "b", "f"}, ElemType::kAct, 2, "mlp=gelu", 0},
          {"grad.down_output", "w_grads", "gradient of down_proj's output",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
      },
      // first_stage
      {
          {"embedding.dropout_mask", "embedding", "embedding dropout mask",
           {"s", "b", "h"}, ElemType::kU8, kSeqSplit, "dropout", 0},
      },
      // first_stage_w_grads
      {
          {"grad.embedding_output", "w_grads", "gradient of the embedding output",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
      },
      // last_stage
      {
          {"final_norm.input_fp32", "head", "fp32 copy of the last block's output",
           {"s", "b", "h"}, ElemType::kFp32, kSeqSplit, "norm=rmsnorm", 0},
          {"final_norm.rstd", "head", "per-token rsqrt",
           {"s", "b", "1"}, ElemType::kFp32, kSeqSplit, "norm=rmsnorm", 0},
          {"final_norm.normalized", "head", "normalized, saved by the weight multiply",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "norm=rmsnorm", 0},
          {"final_norm.input", "head", "last block's output, saved by layer_norm",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "norm=layernorm", 0},
          {"lm_head.input", "head", "final norm output, saved by lm_head",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", kWeightInput},
          {"loss.log_softmax_fp32", "head", "fp32 log-probabilities, saved by log_softmax",
           {"s", "b", "v"}, ElemType::kFp32, 2, "", 0},
      },
      // last_stage_w_grads
      {
          {"grad.logits", "w_grads", "gradient of lm_head's output",
           {"s", "b", "v"}, ElemType::kAct, 2, "", 0},
      },
      // last_stage_transient
      {
          {"lm_head.logits", "head", "lm_head output", {"s", "b", "v"}, ElemType::kAct, 2, "", 0},
          {"loss.logits_fp32", "head", "logits.float(), alive while the loss runs",
           {"s", "b", "v"}, ElemType::kFp32, 2, "", 0},
      },
  };
  return kRecipe;
}

}  // namespace pipecoord::memory
