#include "jobplan/stage_work.h"

namespace pipecoord::jobplan {

std::vector<double> StageWorkFactors(const v1::JobSpec& spec, const v1::Plan& plan) {
  const double h = spec.model().hidden(), ffn = spec.model().ffn_hidden();
  const double s = spec.model().seq_len(), vocab = spec.model().vocab();
  const double block = 2 * (4 * h * h + 3 * h * ffn) + 4 * s * h;
  const double head = 2 * h * vocab;
  std::vector<double> factors(plan.shards_size(), 1.0);
  for (const v1::StageShard& shard : plan.shards()) {
    if (shard.stage() < 0 || shard.stage() >= plan.shards_size()) continue;
    if (!shard.has_head() || shard.num_layers() <= 0 || block <= 0) continue;
    factors[shard.stage()] = (shard.num_layers() * block + head) / (shard.num_layers() * block);
  }
  return factors;
}

}  // namespace pipecoord::jobplan
