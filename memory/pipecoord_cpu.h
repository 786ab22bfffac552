// pipecoord's own CPU backend (worker/model) in memory/'s terms: its model and training
// settings, and one pipeline stage's bytes from the `pipecoord-cpu` recipe
// (pipecoord_cpu_recipe.cc). jobplan's per-rank memory budgets are built from these.
#ifndef PIPECOORD_MEMORY_PIPECOORD_CPU_H_
#define PIPECOORD_MEMORY_PIPECOORD_CPU_H_

#include <cstdint>

#include "common/status.h"
#include "memory/activations.h"
#include "memory/live_peak.h"
#include "memory/model_spec.h"
#include "memory/training_spec.h"

namespace pipecoord::memory {

// The CPU StageModel's block: RMSNorm, grouped-query attention with g = kv_heads key/value heads (0: g = a), SwiGLU, no biases, no dropout, the
// head tied or not, attention that keeps its probabilities.
ModelSpec PipecoordCpuModel(int layers, int64_t hidden, int64_t ffn, int64_t heads, int64_t vocab,
                            int64_t seq_len, int64_t kv_heads = 0, bool qkv_bias = false, bool tied_embeddings = false,
                            int64_t head_dim = 0);

// fp32 weights, fp32 gradients, AdamW's two fp32 moments (16 B per parameter), no recompute,
// tensor parallelism `tp` (Megatron's split, no sequence parallelism), ZeRO stage `zero` over `dp`
// replicas (1: the moments of ceil(n / dp) of a stage's n parameters, as the worker pads its
// shards); recipe "pipecoord-cpu".
// recompute: the blocks' activation recompute (the backend runs the recipe's selective and full).
// sp: sequence parallelism (the norms, residuals and what W re-gathers on 1/tp of the tokens).
TrainingSpec PipecoordCpuTraining(int micro_batch, int tp = 1, int zero = 0, int dp = 1,
                                  Recompute recompute = Recompute::kNone, bool sp = false);

// One stage holding `layers` blocks, plus the embedding and/or the head.
struct CpuStageMemory {
  int64_t parameters = 0;        // count
  int64_t parameter_bytes = 0;   // values + gradients + two moments
  StageBytes per_microbatch;     // stored after F, kept from B until W
};

// `activations` is ResolveActivations(model, training) for the two above.
CpuStageMemory PipecoordCpuStage(const ModelSpec& model, const TrainingSpec& training,
                                 const ActivationModel& activations, int64_t layers,
                                 bool has_embedding, bool has_head);

// The most the CPU backend's counting allocator (kernels/host_pool.h) holds during each op of one
// micro-batch of one stage, replayed from worker/model's code allocation by allocation (its
// HostBuffers, in its order; the kernels' own scratch is plain heap and not counted). Bytes above
// the level before the op:
struct CpuOpPeaks {
  int64_t boundary = 0;      // the activation (or gradient) between stages: b s h / (tp with sp) floats
  // F from nothing of its own: the batch's ids (token ids on the embedding stage, targets on the
  // head's), its input once taken (not on the embedding stage), what it keeps, its output (not on
  // the head stage) and the temporaries (sequence parallelism's gathers, the parallel loss's rows).
  int64_t forward = 0;
  // B above what F stored: the gradient taken (not on the head stage), what it keeps for W, the
  // gradient handed on (not on the embedding stage), the temporaries (dz, dout, the recompute's
  // rebuilt forward, sequence parallelism's gathers and partial sums).
  int64_t backward = 0;
  // W above its start (after the gradients exist): sequence parallelism's gathers of the shards W
  // reads (0 without: W only frees).
  int64_t weight = 0;
  // A PROBE's replayed or seeded F (ForwardOnly: each block's state dropped once it is done),
  // from nothing of its own: its copied input and ids, one block's worth, the output.
  int64_t replay = 0;
  // What F and B leave (the checks against the recipe): stored + output, kept_for_w - stored + output.
  int64_t forward_end = 0;
  int64_t backward_end = 0;
};

// INVALID_ARGUMENT when a size passes 64-bit arithmetic. Expects ValidateModel /
// ValidateTraining to pass for `model` and `training` (PipecoordCpuModel / PipecoordCpuTraining).
Result<CpuOpPeaks> PipecoordCpuOpPeaks(const ModelSpec& model, const TrainingSpec& training, int64_t layers,
                                       bool has_embedding, bool has_head);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_PIPECOORD_CPU_H_
