// The `pipecoord-cpu` recipe: what pipecoord's own CPU backend (worker/model) keeps per
// micro-batch, tensor by tensor, named by the op that saves it.
//
// The CPU StageModel trains in fp32 (every tensor here is fp32 whatever the dtype policy; ids
// are int32) with a Llama-style block: RMSNorm, attention that keeps its s x s probabilities
// (selective recompute drops them until B) with g key/value heads of a, each d = h / a features
// unless the model gives its own head_dim (q, o and their gradients a d wide; k, v and theirs g d),
// RoPE, SwiGLU, no biases, no dropout (full recompute
// keeps only each block's input until B). F saves a
// BlockSaved (worker/model/transformer_block.h); B frees q, k, v, the probabilities, gate and
// up and keeps the rest for W (the `W` tensors) next to the output gradients of every
// weight-carrying op (`w_grads`); W frees everything. Per micro-batch of T = s b tokens, in
// floats (d = h / a): a block keeps T (6h + 2gh/a + 3f + a s + 2) after F and T (10h + 2gh/a + 3f + 2) after B; the
// embedding T int32 ids after F, and T ids + T h after B; the head T (2h + 1 + v) + T int32
// after F and T (3h + 1 + v) after B. With tensor parallelism (no sequence parallelism) each
// tensor's tp dimension below is this rank's share: q, o and their gradients ad/t, k, v and theirs gd/t, the
// probabilities a/t heads, gate, up, z and their gradients f/t, the head's logits (kept as
// probabilities, lm_head.h) and dlogits v/t; the block's and head's inputs and norms whole.
// With sequence parallelism the kSeqSplit tensors are this rank's 1/tp of the tokens: the
// backend keeps only the shards of the norm outputs (a, c, y) and of the gradients W needs
// (dy, dx1) and W gathers them again (transformer_block.h); token ids and targets stay whole.
//
// jobplan/memory_budget.cc prices every rank's budget with this recipe, and
// worker/daemon/memory_budget_run_test checks the budget equals the backend's reported peak,
// byte for byte, on every schedule family.
#include "memory/recipe.h"

namespace pipecoord::memory {

const Recipe& PipecoordCpuRecipe() {
  static const Recipe kRecipe = {
      "pipecoord-cpu",
      "pipecoord's fp32 CPU StageModel: RMSNorm, attention keeping its probabilities, RoPE, SwiGLU",
      // layer (BlockSaved from F)
      {
          {"attention_norm.input", "attention_norm", "block input x, saved by the attention RMSNorm",
           {"s", "b", "h"}, ElemType::kFp32, kSeqSplit, "", kWeightInput},
          {"attention_norm.rstd", "attention_norm", "per-token 1/rms, saved by the attention RMSNorm",
           {"s", "b", "1"}, ElemType::kFp32, kSeqSplit, "", kWeightInput},
          {"attention.qkv_input", "attention", "norm output a, saved by wq, wk, wv",
           {"s", "b", "h"}, ElemType::kFp32, kSeqSplit, "", kWeightInput},
          {"attention.q", "attention", "query after RoPE, saved by QK^T",
           {"s", "b", "a*d"}, ElemType::kFp32, 2, "", 0},
          {"attention.k", "attention", "key after RoPE, saved by QK^T",
           {"s", "b", "g*d"}, ElemType::kFp32, 2, "", 0},
          {"attention.v", "attention", "value, saved by probs x V",
           {"s", "b", "g*d"}, ElemType::kFp32, 2, "", 0},
          {"attention.probs", "attention", "causal softmax probabilities, saved by softmax and probs x V",
           {"b", "a", "s", "s"}, ElemType::kFp32, 1, "", kSelective},
          {"attention.wo_input", "attention", "context o (heads merged), saved by wo",
           {"s", "b", "a*d"}, ElemType::kFp32, 2, "", kWeightInput},
          {"ffn_norm.input", "ffn_norm", "residual sum x1, saved by the FFN RMSNorm",
           {"s", "b", "h"}, ElemType::kFp32, kSeqSplit, "", kWeightInput},
          {"ffn_norm.rstd", "ffn_norm", "per-token 1/rms, saved by the FFN RMSNorm",
           {"s", "b", "1"}, ElemType::kFp32, kSeqSplit, "", kWeightInput},
          {"mlp.w1_w3_input", "mlp", "norm output c, saved by w1 (gate) and w3 (up)",
           {"s", "b", "h"}, ElemType::kFp32, kSeqSplit, "", kWeightInput},
          {"mlp.gate", "mlp", "w1 output, saved by SiLU",
           {"s", "b", "f"}, ElemType::kFp32, 2, "", 0},
          {"mlp.up", "mlp", "w3 output, saved by the product",
           {"s", "b", "f"}, ElemType::kFp32, 2, "", 0},
          {"mlp.w2_input", "mlp", "silu(gate) * up = z, saved by w2",
           {"s", "b", "f"}, ElemType::kFp32, 2, "", kWeightInput},
      },
      // full_recompute: what a block keeps from F until B (B runs its forward again first)
      {
          {"block.input", "checkpoint", "block input, kept by full recompute",
           {"s", "b", "h"}, ElemType::kFp32, kSeqSplit, "", 0},
      },
      // w_grads: what B leaves for W besides the W inputs
      {
          {"grad.w2_output", "w_grads", "dy, gradient of the block output (w2's output)",
           {"s", "b", "h"}, ElemType::kFp32, kSeqSplit, "", 0},
          {"grad.w1_output", "w_grads", "dgate, gradient of w1's output",
           {"s", "b", "f"}, ElemType::kFp32, 2, "", 0},
          {"grad.w3_output", "w_grads", "dup, gradient of w3's output",
           {"s", "b", "f"}, ElemType::kFp32, 2, "", 0},
          {"grad.ffn_norm_output", "w_grads", "dc, gradient of the FFN RMSNorm's output",
           {"s", "b", "h"}, ElemType::kFp32, kSeqSplit, "", 0},
          {"grad.wo_output", "w_grads", "dx1, gradient of wo's output",
           {"s", "b", "h"}, ElemType::kFp32, kSeqSplit, "", 0},
          {"grad.wq_output", "w_grads", "dq, gradient of wq's output",
           {"s", "b", "a*d"}, ElemType::kFp32, 2, "", 0},
          {"grad.wk_output", "w_grads", "dk, gradient of wk's output",
           {"s", "b", "g*d"}, ElemType::kFp32, 2, "", 0},
          {"grad.wv_output", "w_grads", "dv, gradient of wv's output",
           {"s", "b", "g*d"}, ElemType::kFp32, 2, "", 0},
          {"grad.attention_norm_output", "w_grads", "da, gradient of the attention RMSNorm's output",
           {"s", "b", "h"}, ElemType::kFp32, kSeqSplit, "", 0},
      },
      // first_stage: the embedding keeps its ids from F until W
      {
          // Whole with sp too: the vocabulary-parallel lookup's W adds every token's row.
          {"embedding.ids", "embedding", "token ids, saved by the embedding lookup",
           {"s", "b", "1"}, ElemType::kI32, kWholeOnEveryRank, "", kWeightInput},
      },
      // first_stage_w_grads
      {
          {"grad.embedding_output", "w_grads", "gradient of the embedding output",
           {"s", "b", "h"}, ElemType::kFp32, kSeqSplit, "", 0},
      },
      // last_stage (HeadSaved from F): x, rstd, y until W; logits and targets until B
      {
          {"final_norm.input", "head", "last block's output x, saved by the final RMSNorm",
           {"s", "b", "h"}, ElemType::kFp32, kSeqSplit, "", kWeightInput},
          {"final_norm.rstd", "head", "per-token 1/rms, saved by the final RMSNorm",
           {"s", "b", "1"}, ElemType::kFp32, kSeqSplit, "", kWeightInput},
          {"output.input", "head", "final norm output y, saved by the output projection",
           {"s", "b", "h"}, ElemType::kFp32, kSeqSplit, "", kWeightInput},
          {"loss.logits", "head", "output projection's logits, saved by softmax cross-entropy",
           {"s", "b", "v"}, ElemType::kFp32, 2, "", 0},
          // Whole with sp too: the vocabulary-parallel loss covers every token.
          {"loss.targets", "head", "next-token ids, saved by cross-entropy",
           {"s", "b", "1"}, ElemType::kI32, kWholeOnEveryRank, "", 0},
      },
      // last_stage_w_grads
      {
          {"grad.logits", "w_grads", "dlogits, gradient of the output projection's output",
           {"s", "b", "v"}, ElemType::kFp32, 2, "", 0},
          {"grad.final_norm_output", "w_grads", "dy, gradient of the final RMSNorm's output",
           {"s", "b", "h"}, ElemType::kFp32, kSeqSplit, "", 0},
      },
      // last_stage_transient: the loss works inside the saved logits
      {},
  };
  return kRecipe;
}

}  // namespace pipecoord::memory
