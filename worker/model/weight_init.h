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

namespace pipecoord::model {

// The stream seed for one tensor: CombineSeeds(model_seed, HashString(name)).
uint64_t TensorSeed(uint64_t model_seed, std::string_view name);

// Fills out with values uniform in [-sqrt(3) std, sqrt(3) std) from TensorSeed(seed, name).
void InitUniform(std::span<float> out, uint64_t model_seed, std::string_view name, double std);

// How a [rows, cols] weight (row-major, rows = output features) is cut over tensor-parallel
// ranks: kRows gives rank r rows [r rows/tp, (r+1) rows/tp) (column-parallel layers: wq, wk,
// wv, w1, w3; a vocabulary-parallel table), kColumns the columns [r cols/tp, (r+1) cols/tp) of
// every row (row-parallel layers: wo, w2), kWhole everything (norm gains). Every rank cuts its
// slice from the same whole tensor (InitUniform's, or a checkpoint's), so a model starts
// identical under every tp and its checkpoints can be put back together.
enum class TpSplit { kWhole, kRows, kColumns };

// How the model's tensor `name` (StageModel's names: "layers.3.attention.wq.weight",
// "tok_embeddings.weight", ...) is split: Megatron's column-parallel wq, wk, wv, w1, w3 and the
// vocabulary-parallel embedding and output by rows, the row-parallel wo, w2 by columns, norm
// gains whole.
TpSplit TpSplitOf(std::string_view name);

// Rank `rank`'s slice of `whole` (rows x cols elements); tp must divide the split dimension.
std::vector<float> TensorParallelSlice(std::span<const float> whole, int64_t rows, int64_t cols, TpSplit split,
                                       int tp, int rank);

// The inverse: the whole [rows, cols] tensor from every rank's slice, slices[r] rank r's (one
// slice: kWhole, or tp 1). Each slice must hold rows x cols / slices.size() elements (kWhole:
// rows x cols); INVALID_ARGUMENT naming the rank otherwise.
Result<std::vector<float>> TensorParallelJoin(const std::vector<std::vector<float>>& slices, int64_t rows, int64_t cols,
                                              TpSplit split);

}  // namespace pipecoord::model

#endif  // PIPECOORD_WORKER_MODEL_WEIGHT_INIT_H_
