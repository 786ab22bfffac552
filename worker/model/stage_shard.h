// StageShard: one virtual stage's share of the model (proto StageShard's fields): a run of
// consecutive transformer blocks, plus the token embedding on the first stage and the final
// norm, LM head and loss on the last.
#ifndef PIPECOORD_WORKER_MODEL_STAGE_SHARD_H_
#define PIPECOORD_WORKER_MODEL_STAGE_SHARD_H_

#include <vector>

#include "common/status.h"
#include "worker/model/model_config.h"

namespace pipecoord::model {

struct StageShard {
  int stage = 0;        // virtual stage index (informational)
  int first_layer = 0;  // global index of the first block
  int num_layers = 0;   // blocks [first_layer, first_layer + num_layers); may be 0
  bool has_embedding = false;
  bool has_head = false;
};

// The whole model in one stage: what ReferenceTrainer runs.
StageShard WholeModel(const ModelConfig& config);

// Splits the model into consecutive stages with the given block counts (summing to
// config.layers); the embedding goes to the first stage and the head to the last.
Result<std::vector<StageShard>> SplitModel(const ModelConfig& config,
                                           const std::vector<int>& layers_per_stage);

// Checks the shard against the config: the block range lies inside [0, layers).
Status ValidateShard(const ModelConfig& config, const StageShard& shard);

}  // namespace pipecoord::model

#endif  // PIPECOORD_WORKER_MODEL_STAGE_SHARD_H_
