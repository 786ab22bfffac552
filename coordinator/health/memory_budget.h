// Memory budget per rank for the CPU model (worker/model): what a healthy rank's reported peak
// stays under. Parameters count four float32 copies (values, gradients, AdamW's two moments);
// activations count the most micro-batches the rank holds at once (the schedule's
// PeakActivations, rounded up) times an upper bound of what one micro-batch saves on the
// rank's stages:
//   per block and token: 12h + 3f + a*s + 2 floats (F's saved tensors plus B's gradients)
//   head, per token: 3h + 2V + 2 floats and one int32 target
//   embedding, per token: one int32 id and h floats (its output gradient)
// with h hidden, f the SwiGLU width, a heads, s the sequence length, V the vocabulary. The
// budget is that estimate times (1 + kBudgetHeadroom).
#ifndef PIPECOORD_COORDINATOR_HEALTH_MEMORY_BUDGET_H_
#define PIPECOORD_COORDINATOR_HEALTH_MEMORY_BUDGET_H_

#include <cstdint>
#include <vector>

#include "proto/job.pb.h"

namespace pipecoord::coordinator::health {

inline constexpr double kBudgetHeadroom = 0.25;

struct RankMemoryEstimate {
  uint64_t parameter_bytes = 0;      // values + gradients + two moments
  uint64_t microbatch_bytes = 0;     // one micro-batch's saved state on all the rank's stages
  int peak_microbatches = 0;         // ceil of the schedule's peak live activations
  uint64_t budget_bytes = 0;         // (parameters + peak x micro-batch) x (1 + headroom)
};

// One estimate per pipeline rank. `spec` has passed WithDefaults; `plan` holds shards and jobs.
std::vector<RankMemoryEstimate> EstimateRankMemory(const v1::JobSpec& spec, const v1::Plan& plan);

// Sets plan->memory_budget_bytes from EstimateRankMemory.
void FillMemoryBudgets(const v1::JobSpec& spec, v1::Plan* plan);

}  // namespace pipecoord::coordinator::health

#endif  // PIPECOORD_COORDINATOR_HEALTH_MEMORY_BUDGET_H_
