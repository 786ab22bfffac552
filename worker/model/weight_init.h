// Deterministic weight initialisation that does not depend on the partition: a tensor's values
// come from (model seed, the tensor's full name) alone, and the full name carries the GLOBAL
// layer index ("layers.3.attention.wq"), so block 3 gets the same weights whether it sits in
// stage 0 of 1 or stage 2 of 4. Values are uniform with the requested standard deviation
// (integer RNG and one sqrt, so they are identical on every machine).
#ifndef PIPECOORD_WORKER_MODEL_WEIGHT_INIT_H_
#define PIPECOORD_WORKER_MODEL_WEIGHT_INIT_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/tensor_parallel_split.h"

namespace pipecoord::model {

// The stream seed for one tensor: CombineSeeds(model_seed, HashString(name)).
uint64_t TensorSeed(uint64_t model_seed, std::string_view name);

// Fills out with values uniform in [-sqrt(3) std, sqrt(3) std) from TensorSeed(seed, name).
void InitUniform(std::span<float> out, uint64_t model_seed, std::string_view name, double std);

// The tensor-parallel split of the model's tensors lives in common/tensor_parallel_split.h (the
// CLI's export joins slices with it too); the model's code names it as its own.
using ::pipecoord::TensorParallelJoin;
using ::pipecoord::TensorParallelSlice;
using ::pipecoord::RowsCols;
using ::pipecoord::TpSplit;
using ::pipecoord::TpSplitOf;

}  // namespace pipecoord::model

#endif  // PIPECOORD_WORKER_MODEL_WEIGHT_INIT_H_
