// Memory budget per rank for the CPU model (worker/model): what a healthy rank's reported peak
// stays under. It counts what the CPU backend allocates and reports, nothing more, and takes
// every byte from memory/'s `pipecoord-cpu` recipe (memory/pipecoord_cpu_recipe.cc,
// memory/pipecoord_cpu.h): there is no formula of its own here.
//   parameters: memory/'s parameter count of the stage's blocks, embedding and head, at the
//     fp32 policy's 16 B each (values, gradients, AdamW's two moments);
//   activations: the most bytes the rank's micro-batches in flight hold at once, over all the
//     stages it holds (the peak of the rank's total, as the CPU backend measures it: a V-shaped
//     rank's two chunks peak at different moments, so this is less than the sum of their peaks).
// A micro-batch holds one of two amounts on a stage (SavedBytes): from its F to its B what F
// saved (the recipe's stored bytes), from its B to its W what B keeps for W (the recipe's
// w_bytes: more than F saved when the attention probabilities are smaller than 4h per token,
// since W needs the gradients of every weight-carrying op). The peak is found by walking the
// rank's job list in order, as the executor runs it, noting the rank's total after each F and
// each B (BW: after its B half), where the backend notes its peak; W only frees.
// The result does not depend on timing, so a healthy rank reports exactly its budget: anything
// above is memory the plan does not know about (worker/daemon/memory_budget_run_test checks
// budget == measured peak on every rank of every schedule family).
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
  uint64_t activation_bytes = 0;  // the most held at once, over the rank's stages
  uint64_t budget_bytes = 0;      // parameter_bytes + activation_bytes
};

// One micro-batch on `shard`, from the pipecoord-cpu recipe. `spec` has passed WithDefaults.
SavedBytes StageSavedBytes(const v1::JobSpec& spec, const v1::StageShard& shard);

// One estimate per pipeline rank. `spec` has passed WithDefaults; `plan` holds shards and jobs.
std::vector<RankMemoryEstimate> EstimateRankMemory(const v1::JobSpec& spec, const v1::Plan& plan);

// Sets plan->memory_budget_bytes from EstimateRankMemory.
void FillMemoryBudgets(const v1::JobSpec& spec, v1::Plan* plan);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_MEMORY_BUDGET_H_
