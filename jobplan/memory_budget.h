// Memory budget per rank for the CPU model (worker/model): what a healthy rank's reported peak
// stays under. It counts what the CPU backend allocates and reports, nothing more:
//   parameters: four float32 copies (values, gradients, AdamW's two moments), 16 B each;
//   activations: for each stage the rank holds, the most bytes its micro-batches in flight hold
//     at once, summed over the rank's stages (the backend reports the sum of its stages' peaks).
// A micro-batch holds one of two amounts on a stage (SavedBytes): from its F to its B what F
// saved, from its B to its W what B keeps for W (more than F saved when the attention
// probabilities are smaller than 4h per token: W needs the gradients of every weight-carrying
// op). The stage's peak is found by walking the rank's job list in order, as the executor runs
// it, noting the stage's total after each F and each B (BW: after its B half), where the model
// notes its own peak; W only frees. The result does not depend on timing, so a healthy rank
// reports exactly its budget: anything above is memory the plan does not know about.
// Per micro-batch of T = b s tokens, h hidden, f the SwiGLU width, a heads, s the sequence
// length, V the vocabulary (floats unless said):
//   block:     after F  T (8h + 3f + a s + 2)     after B  T (12h + 3f + 2)
//   embedding: after F  T int32 ids              after B  T int32 ids + T h
//   head:      after F  T (2h + 1 + V) + T int32  after B  T (3h + 1 + V)
#ifndef PIPECOORD_JOBPLAN_MEMORY_BUDGET_H_
#define PIPECOORD_JOBPLAN_MEMORY_BUDGET_H_

#include <cstdint>
#include <vector>

#include "proto/job.pb.h"

namespace pipecoord::jobplan {

// What one micro-batch holds on one stage, by phase, in bytes.
struct SavedBytes {
  uint64_t after_f = 0;  // from its F to its B
  uint64_t after_b = 0;  // from its B to its W
};

struct RankMemoryEstimate {
  uint64_t parameter_bytes = 0;   // values + gradients + two moments
  uint64_t activation_bytes = 0;  // sum over the rank's stages of each stage's peak
  uint64_t budget_bytes = 0;      // parameter_bytes + activation_bytes
};

// One micro-batch on `shard`. `spec` has passed WithDefaults.
SavedBytes StageSavedBytes(const v1::JobSpec& spec, const v1::StageShard& shard);

// One estimate per pipeline rank. `spec` has passed WithDefaults; `plan` holds shards and jobs.
std::vector<RankMemoryEstimate> EstimateRankMemory(const v1::JobSpec& spec, const v1::Plan& plan);

// Sets plan->memory_budget_bytes from EstimateRankMemory.
void FillMemoryBudgets(const v1::JobSpec& spec, v1::Plan* plan);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_MEMORY_BUDGET_H_
