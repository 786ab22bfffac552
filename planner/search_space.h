// SearchSpace: which strategies the planner tries, with defaults that cover common practice.
#ifndef PIPECOORD_PLANNER_SEARCH_SPACE_H_
#define PIPECOORD_PLANNER_SEARCH_SPACE_H_

#include <string>
#include <vector>

#include "common/status.h"
#include "memory/training_spec.h"

namespace pipecoord::planner {

struct SearchSpace {
  int global_batch = 0;  // samples per step; required: dp x micro-batch must divide it
  std::vector<int> micro_batches = {1, 2, 4, 8, 16};
  std::vector<int> zero_stages = {0, 1, 2, 3};
  std::vector<memory::Recompute> recompute = {memory::Recompute::kNone, memory::Recompute::kSelective,
                                              memory::Recompute::kFull};
  // Schedule names; empty: every registered schedule but the CSV importer.
  std::vector<std::string> schedules;
  // Chunks per rank tried for schedules that take any (interleaved, looped-bfs); schedules with
  // a fixed count (1F1B: 1, V shapes: 2) use theirs.
  std::vector<int> vpps = {2, 3, 4, 5, 6, 8};
  int max_tp = 64;               // tensor-parallel degrees tried: divisors of gpus up to this
  bool sequence_parallel = true;  // also try tp > 1 with sequence parallelism
  memory::DtypePolicy dtype = memory::DtypePolicy::kBf16;
  memory::Optimizer optimizer = memory::Optimizer::kAdamW;
  std::string recipe = "megatron";
  // Degrees fixed in advance (0: any): only strategies with this pipeline degree, data-parallel
  // degree and micro-batch count are tried (a schedule "auto" job keeps what its spec set).
  int pp = 0;
  int dp = 0;
  int microbatches = 0;
};

// global_batch >= 1, non-empty lists, values in range, known schedule names, fixed degrees
// >= 0. Errors name the field.
Status ValidateSearchSpace(const SearchSpace& space);

}  // namespace pipecoord::planner

#endif  // PIPECOORD_PLANNER_SEARCH_SPACE_H_
