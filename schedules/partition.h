// Layer placement: how many transformer blocks each virtual stage holds.
#ifndef PIPECOORD_SCHEDULES_PARTITION_H_
#define PIPECOORD_SCHEDULES_PARTITION_H_

#include <string>
#include <vector>

#include "common/status.h"

namespace pipecoord::schedules {

// How PartitionLayers' errors name its inputs, as the caller's user wrote them: pipectl's flags
// by default, "spec.stageLayers", "spec.model.layers" and "spec.pp" for a JobSpec. One rank's
// count is "<rank_layers>[r]".
struct PartitionFields {
  std::string rank_layers = "--stage-layers";
  std::string layers = "--layers";
  std::string pp = "--pp";
};

// Blocks per virtual stage (model order) for `layers` blocks over the stages of
// `stage_to_rank` (pp ranks). With `rank_layers` (one count per rank, summing to `layers`),
// each rank's count is dealt round-robin over its chunks in model order, so a rank's chunks
// differ by at most one block; without, ranks get layers/pp each and the first layers%pp ranks
// one more. Every chunk needs at least one block. Errors are INVALID_ARGUMENT
// "FIELD: RULE, got VALUE" with the fields named by `fields`, e.g.
// "--stage-layers: counts must sum to --layers (8), got 6" or
// "spec.stageLayers[1]: must be >= 2 (a layer for each of rank 1's 2 chunks), got 1".
Result<std::vector<int>> PartitionLayers(int layers, int pp, const std::vector<int>& stage_to_rank,
                                         const std::vector<int>& rank_layers = {},
                                         const PartitionFields& fields = {});

// Cost-balanced contiguous placement: splits blocks with `layer_costs` over `num_stages`
// stages (each at least one block) minimising the costliest stage, counting `embedding_cost` on
// the first stage and `head_cost` (final norm, LM head, loss) on the last. Exact (dynamic
// programming over split points).
Result<std::vector<int>> BalanceLayers(const std::vector<double>& layer_costs,
                                       double embedding_cost, double head_cost, int num_stages);

// Each stage's work as a fraction of one rank's mean share (CostModel::stage_fraction): with
// every stage equal and v chunks per rank, 1/v each.
std::vector<double> StageFractions(const std::vector<double>& stage_costs, int pp);

// Stage costs of a placement: the sum of its blocks' costs, plus embedding/head on the ends.
std::vector<double> StageCostsOf(const std::vector<int>& stage_layers,
                                 const std::vector<double>& layer_costs, double embedding_cost,
                                 double head_cost);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_PARTITION_H_
