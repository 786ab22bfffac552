// The `megatron` recipe: what a Megatron-LM GPT block keeps for backward.
//
// With attention=eager, LayerNorm, GeLU and dropout this is exactly the accounting of
// Korthikanti et al. 2022 (section 4.1): sbh(34 + 5as/h) bytes per block in 16-bit training.
// With attention=flash and SwiGLU it is the per-layer breakdown that Megatron-LM's
// tools/get_training_info measured with a tracing allocator (flash attention keeps q, k, v and
// its output; the SwiGLU of that Megatron version is unfused, so the 2f-wide fc1 output, the
// SiLU output and the product all stay alive). docs/memory.md derives every entry.
#include "memory/recipe.h"

namespace pipecoord::memory {

const Recipe& MegatronRecipe() {
  static const Recipe kRecipe = {
      "megatron",
      "Megatron-LM: fused norms and bias-dropout-add; flash or eager attention",
      // layer
      {
          {"input_norm.input", "input_norm", "block input, saved by the input norm",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
          {"attention.qkv_input", "attention", "norm output, saved by the QKV projection",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", kWeightInput},
          {"attention.q", "attention", "query, saved by QK^T or flash attention",
           {"s", "b", "a*d"}, ElemType::kAct, 2, "", 0},
          {"attention.k", "attention", "key, repeated to every head, saved by QK^T",
           {"s", "b", "a*d"}, ElemType::kAct, 2, "attention=eager", 0},
          {"attention.v", "attention", "value, repeated to every head, saved by softmax x V",
           {"s", "b", "a*d"}, ElemType::kAct, 2, "attention=eager", 0},
          {"attention.k", "attention", "key (g groups), saved by flash attention",
           {"s", "b", "g*d"}, ElemType::kAct, 2, "attention=flash", 0},
          {"attention.v", "attention", "value (g groups), saved by flash attention",
           {"s", "b", "g*d"}, ElemType::kAct, 2, "attention=flash", 0},
          {"attention.softmax_output", "attention", "s x s probabilities, saved by softmax",
           {"b", "a", "s", "s"}, ElemType::kAct, 1, "attention=eager", kSelective},
          {"attention.softmax_dropout_mask", "attention", "attention dropout mask",
           {"b", "a", "s", "s"}, ElemType::kU8, 1, "attention=eager,dropout", kSelective},
          {"attention.softmax_dropout_output", "attention", "dropped-out probabilities, saved by x V",
           {"b", "a", "s", "s"}, ElemType::kAct, 1, "attention=eager,dropout", kSelective},
          {"attention.flash_output", "attention", "attention output, saved by flash attention",
           {"s", "b", "a*d"}, ElemType::kAct, 2, "attention=flash", 0},
          {"attention.proj_input", "attention", "context (heads merged), saved by the output projection",
           {"s", "b", "a*d"}, ElemType::kAct, 2, "", kWeightInput},
          {"attention.dropout_mask", "dropout_add", "mask of the bias-dropout-add after attention",
           {"s", "b", "h"}, ElemType::kU8, kSeqSplit, "dropout", 0},
          {"post_attention_norm.input", "post_attention_norm", "residual sum, saved by the norm",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
          {"mlp.fc1_input", "mlp", "norm output, saved by fc1",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", kWeightInput},
          {"mlp.gelu_input", "mlp", "fc1 output, saved by GeLU",
           {"s", "b", "f"}, ElemType::kAct, 2, "mlp=gelu", 0},
          {"mlp.fc1_output", "mlp", "gate and up halves (bias added), saved by SiLU and the product",
           {"s", "b", "2*f"}, ElemType::kAct, 2, "mlp=swiglu", 0},
          {"mlp.silu_output", "mlp", "SiLU(gate), saved by the product",
           {"s", "b", "f"}, ElemType::kAct, 2, "mlp=swiglu", 0},
          {"mlp.fc2_input", "mlp", "activation output, saved by fc2",
           {"s", "b", "f"}, ElemType::kAct, 2, "", kWeightInput},
          {"mlp.dropout_mask", "dropout_add", "mask of the bias-dropout-add after the MLP",
           {"s", "b", "h"}, ElemType::kU8, kSeqSplit, "dropout", 0},
      },
      // full_recompute
      {
          {"block.input", "checkpoint", "block input, kept by full recompute",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
      },
      // w_grads: output gradients of the four linear layers, which W multiplies with their inputs
      {
          {"grad.qkv_output", "w_grads", "gradient of the QKV projection's output",
           {"s", "b", "a*d+2*g*d"}, ElemType::kAct, 2, "", 0},
          {"grad.proj_output", "w_grads", "gradient of the output projection's output",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
          {"grad.fc1_output", "w_grads", "gradient of fc1's output",
           {"s", "b", "f"}, ElemType::kAct, 2, "mlp=gelu", 0},
          {"grad.fc1_output", "w_grads", "gradient of fc1's output (gate and up)",
           {"s", "b", "2*f"}, ElemType::kAct, 2, "mlp=swiglu", 0},
          {"grad.fc2_output", "w_grads", "gradient of fc2's output",
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
          {"final_norm.input", "head", "last block's output, saved by the final norm",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
          {"lm_head.input", "head", "final norm output, saved by the LM head",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", kWeightInput},
          {"loss.logits_fp32", "head", "fp32 logits (softmax), saved by the vocab-parallel cross entropy",
           {"s", "b", "v"}, ElemType::kFp32, 2, "", 0},
      },
      // last_stage_w_grads
      {
          {"grad.logits", "w_grads", "gradient of the LM head's output",
           {"s", "b", "v"}, ElemType::kAct, 2, "", 0},
      },
      // last_stage_transient
      {
          {"lm_head.logits", "head", "LM head output before the fp32 cast",
           {"s", "b", "v"}, ElemType::kAct, 2, "", 0},
      },
  };
  return kRecipe;
}

}  // namespace pipecoord::memory
