// The `pipecoord-cuda` recipe: what pipecoord's CUDA backend (worker/cuda/cuda_stage_model.cc)
// keeps per micro-batch on the device, tensor by tensor, named by the op that saves it, in the
// dtype the kernels keep it in.
//
// The model is the CPU StageModel's (RMSNorm, RoPE, SwiGLU, grouped-query attention: q and o
// a x d wide, k and v g x d; q/k/v biases where the model has them (parameters only: they add
// in place); no dropout; full recompute keeps only each block's input) in one of two precisions (JobSpec.precision): "fp32", every activation fp32; or
// "bf16", activations and their gradients bf16. Either way the RMSNorms' per-token 1/rms and
// flash attention's per-row log-sum-exps are fp32 (the kernels write float), and token ids are
// int32: below, `kAct` is the precision's activation type, the rest is fixed. Attention is flash
// (kernels/cuda/attention.h): it keeps no s x s matrix, only the log-sum-exp of each query row
// (b a s floats) from which B recomputes the probabilities tile by tile.
//
// F keeps BlockState's x, rstd1, a, q, k, v, lse, o, x1, rstd2, c, gate, up, z; B frees q, k, v,
// lse, gate and up and keeps the rest for W (`W` flag) next to the output gradients of every
// weight-carrying op (`w_grads`); W frees everything. Per micro-batch of T = s b tokens, with e
// the activation bytes (4 fp32, 2 bf16), in bytes:
//   block      after F  T (e (4h + 2ad + 2gd + 3f) + 4a + 8)
//              after B  T (e (8h + 2ad + 2gd + 3f) + 8)   (ad = gd = h without GQA or head_dim)
//   embedding  after F  4T (ids)                       after B  4T + e T h
//   head       after F  T (e (2h + v) + 4) + 4T        after B  T (e (3h + v) + 4)
// (the head's B turns the logits into their gradient in place, and frees the targets). While
// the head's F runs, the loss of the micro-batch (one double) exists too.
//
// Parameters (memory/param_states.h with this recipe's TrainingSpec): fp32 masters, fp32
// gradients and AdamW's two fp32 moments, 16 B per parameter; in bf16 also the bf16 copy the
// kernels read, 18 B. What else the backend allocates (the per-tensor rounding of its caching
// pool, the transients inside B, the RoPE tables, the tensors passed between stages, and what
// lives outside the pool) is in memory/pipecoord_cuda.h, which jobplan/memory_budget.cc prices
// cuda jobs with.
#include "memory/recipe.h"

namespace pipecoord::memory {

const Recipe& PipecoordCudaRecipe() {
  static const Recipe kRecipe = {
      "pipecoord-cuda",
      "pipecoord's CUDA CudaStageModel (fp32 or bf16 activations): RMSNorm, RoPE, flash attention "
      "keeping fp32 log-sum-exps, SwiGLU",
      // layer (BlockState from F)
      {
          {"attention_norm.input", "attention_norm", "block input x, saved by the attention RMSNorm",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", kWeightInput},
          {"attention_norm.rstd", "attention_norm", "per-token 1/rms (fp32), saved by the attention RMSNorm",
           {"s", "b", "1"}, ElemType::kFp32, kSeqSplit, "", kWeightInput},
          {"attention.qkv_input", "attention", "norm output a, saved by wq, wk, wv",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", kWeightInput},
          {"attention.q", "attention", "query after RoPE, saved by flash attention",
           {"s", "b", "a*d"}, ElemType::kAct, 2, "", 0},
          {"attention.k", "attention", "key after RoPE (g key/value heads), saved by flash attention",
           {"s", "b", "g*d"}, ElemType::kAct, 2, "", 0},
          {"attention.v", "attention", "value (g key/value heads), saved by flash attention",
           {"s", "b", "g*d"}, ElemType::kAct, 2, "", 0},
          {"attention.lse", "attention",
           "per-row log-sum-exp (fp32), saved by flash attention in place of the s x s probabilities",
           {"b", "a", "s"}, ElemType::kFp32, 1, "", 0},
          {"attention.wo_input", "attention", "flash attention's output o (heads merged), saved by wo and by "
           "flash attention's backward",
           {"s", "b", "a*d"}, ElemType::kAct, 2, "", kWeightInput},
          {"ffn_norm.input", "ffn_norm", "residual sum x1, saved by the FFN RMSNorm",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", kWeightInput},
          {"ffn_norm.rstd", "ffn_norm", "per-token 1/rms (fp32), saved by the FFN RMSNorm",
           {"s", "b", "1"}, ElemType::kFp32, kSeqSplit, "", kWeightInput},
          {"mlp.w1_w3_input", "mlp", "norm output c, saved by w1 (gate) and w3 (up)",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", kWeightInput},
          {"mlp.gate", "mlp", "w1 output, saved by SwiGLU",
           {"s", "b", "f"}, ElemType::kAct, 2, "", 0},
          {"mlp.up", "mlp", "w3 output, saved by SwiGLU",
           {"s", "b", "f"}, ElemType::kAct, 2, "", 0},
          {"mlp.w2_input", "mlp", "silu(gate) * up = z, saved by w2",
           {"s", "b", "f"}, ElemType::kAct, 2, "", kWeightInput},
      },
      // full_recompute: what each block keeps from F to B (B runs its forward again first)
      {
          {"block.input", "checkpoint", "block input, kept by full recompute",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
      },
      // w_grads: what B leaves for W besides the W inputs
      {
          {"grad.w2_output", "w_grads", "dy, gradient of the block output (w2's output)",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
          {"grad.w1_output", "w_grads", "dgate, gradient of w1's output",
           {"s", "b", "f"}, ElemType::kAct, 2, "", 0},
          {"grad.w3_output", "w_grads", "dup, gradient of w3's output",
           {"s", "b", "f"}, ElemType::kAct, 2, "", 0},
          {"grad.ffn_norm_output", "w_grads", "dc, gradient of the FFN RMSNorm's output",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
          {"grad.wo_output", "w_grads", "dx1, gradient of wo's output",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
          {"grad.wq_output", "w_grads", "dq, gradient of wq's output",
           {"s", "b", "a*d"}, ElemType::kAct, 2, "", 0},
          {"grad.wk_output", "w_grads", "dk, gradient of wk's output",
           {"s", "b", "g*d"}, ElemType::kAct, 2, "", 0},
          {"grad.wv_output", "w_grads", "dv, gradient of wv's output",
           {"s", "b", "g*d"}, ElemType::kAct, 2, "", 0},
          {"grad.attention_norm_output", "w_grads", "da, gradient of the attention RMSNorm's output",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
      },
      // first_stage: the embedding keeps its ids from F until W
      {
          {"embedding.ids", "embedding", "token ids (int32), saved by the embedding lookup (every token's, "
           "with sequence parallelism too)",
           {"s", "b", "1"}, ElemType::kI32, kWholeOnEveryRank, "", kWeightInput},
      },
      // first_stage_w_grads
      {
          {"grad.embedding_output", "w_grads", "gradient of the embedding output",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
      },
      // last_stage (HeadState from F): x, rstd, y until W; logits and targets until B
      {
          {"final_norm.input", "head", "last block's output x, saved by the final RMSNorm",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", kWeightInput},
          {"final_norm.rstd", "head", "per-token 1/rms (fp32), saved by the final RMSNorm",
           {"s", "b", "1"}, ElemType::kFp32, kSeqSplit, "", kWeightInput},
          {"output.input", "head", "final norm output y, saved by the output projection",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", kWeightInput},
          {"loss.logits", "head", "output projection's logits, saved by cross-entropy (B writes "
           "their gradient in place)",
           {"s", "b", "v"}, ElemType::kAct, 2, "", 0},
          {"loss.targets", "head", "next-token ids (int32), saved by cross-entropy (every token's, with "
           "sequence parallelism too)",
           {"s", "b", "1"}, ElemType::kI32, kWholeOnEveryRank, "", 0},
      },
      // last_stage_w_grads
      {
          {"grad.logits", "w_grads", "dlogits, gradient of the output projection's output (in the "
           "logits' storage)",
           {"s", "b", "v"}, ElemType::kAct, 2, "", 0},
          {"grad.final_norm_output", "w_grads", "dy, gradient of the final RMSNorm's output",
           {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
      },
      // last_stage_transient: the micro-batch's loss (one double) while F adds it to the step's sum
      {
          {"loss.value", "head", "the micro-batch's mean loss (one double), added to the step's sum",
           {"8", "1"}, ElemType::kU8, 1, "", 0},  // tp_dim 1: ceil(1 / t) = 1, never split
      },
  };
  return kRecipe;
}

}  // namespace pipecoord::memory
