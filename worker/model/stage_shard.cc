#include "worker/model/stage_shard.h"

#include <string>

namespace pipecoord::model {

StageShard WholeModel(const ModelConfig& config) {
  return StageShard{0, 0, config.layers, true, true};
}

Result<std::vector<StageShard>> SplitModel(const ModelConfig& config,
                                           const std::vector<int>& layers_per_stage) {
  if (layers_per_stage.empty()) {
    return InvalidArgument("layers_per_stage: needs at least one stage");
  }
  std::vector<StageShard> shards;
  int first = 0;
  for (size_t i = 0; i < layers_per_stage.size(); ++i) {
    const int n = layers_per_stage[i];
    if (n < 0) {
      return InvalidArgument("layers_per_stage[" + std::to_string(i) + "]: must be >= 0, got " +
                             std::to_string(n));
    }
    shards.push_back(StageShard{static_cast<int>(i), first, n, i == 0,
                                i + 1 == layers_per_stage.size()});
    first += n;
  }
  if (first != config.layers) {
    return InvalidArgument("layers_per_stage: must sum to layers (" +
                           std::to_string(config.layers) + "), got " + std::to_string(first));
  }
  return shards;
}

Status ValidateShard(const ModelConfig& config, const StageShard& shard) {
  if (shard.first_layer < 0 || shard.num_layers < 0 ||
      shard.first_layer + shard.num_layers > config.layers) {
    return InvalidArgument("stage " + std::to_string(shard.stage) + ": layers [" +
                           std::to_string(shard.first_layer) + ", " +
                           std::to_string(shard.first_layer + shard.num_layers) +
                           ") must lie inside [0, " + std::to_string(config.layers) + ")");
  }
  return Status::Ok();
}

}  // namespace pipecoord::model
