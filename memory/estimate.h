// The analytic memory model: per rank, parameters, gradients, optimizer states, activations
// under the chosen schedule, and the peak.
#ifndef PIPECOORD_MEMORY_ESTIMATE_H_
#define PIPECOORD_MEMORY_ESTIMATE_H_

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "memory/activations.h"
#include "memory/model_spec.h"
#include "memory/param_states.h"
#include "memory/training_spec.h"

namespace pipecoord::memory {

struct RankMemory {
  int rank = 0;
  std::vector<int> stages;  // virtual stages this rank holds, in model order
  int layers = 0;           // transformer blocks over those stages
  bool first_stage = false;  // holds the embedding
  bool last_stage = false;   // holds the final norm, LM head and loss
  int64_t params = 0;        // parameters of this rank's TP/PP share, before ZeRO sharding
  StateBytes states;
  int64_t activations_bytes = 0;  // peak live saved activations under the schedule
  int live_microbatches = 0;      // (stage, micro-batch) pairs live at that peak
  // Working memory on top of the saved activations: the block rebuilt by recompute during
  // its backward, the loss's logits on the last stage, one gathered block under ZeRO-3.
  int64_t transient_bytes = 0;
  int64_t peak_bytes = 0;  // states + activations + transient
};

struct MemoryReport {
  ModelSpec model;
  TrainingSpec training;  // vpp resolved to the schedule's
  ActivationModel activations;
  bool split_backward = false;     // the schedule runs B and W apart
  std::vector<int> stage_to_rank;  // per virtual stage
  std::vector<int> stage_layers;   // blocks per virtual stage
  int64_t total_params = 0;        // the whole model
  std::vector<RankMemory> ranks;   // one per pipeline rank

  // The rank with the largest peak (the first such).
  const RankMemory& Tightest() const;
};

// Validates both specs, builds the schedule's compute order with the schedule engine
// (schedules::GenerateComputeOrder: an unknown name is INVALID_ARGUMENT, a generator not built
// yet is UNIMPLEMENTED), places layers (schedules::PartitionLayers) and walks each rank's list
// (PeakLiveActivations). Errors name the field and the rule.
Result<MemoryReport> EstimateMemory(const ModelSpec& model, const TrainingSpec& training);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_ESTIMATE_H_
