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

// The CPU StageModel's block: RMSNorm, no GQA (g = a), SwiGLU, no biases, no dropout, untied
// head, attention that keeps its probabilities.
ModelSpec PipecoordCpuModel(int layers, int64_t hidden, int64_t ffn, int64_t heads, int64_t vocab,
                            int64_t seq_len);

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

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_PIPECOORD_CPU_H_
