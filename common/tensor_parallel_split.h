// How tensor parallelism splits the model's tensors over a group's ranks (Megatron's layout), and
// back: pure functions the model (worker/model), the initial weights' loader and `pipectl export`
// share, so a slice cut in training is exactly what export puts back.
#ifndef PIPECOORD_COMMON_TENSOR_PARALLEL_SPLIT_H_
#define PIPECOORD_COMMON_TENSOR_PARALLEL_SPLIT_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace pipecoord {

// How a [rows, cols] weight (row-major, rows = output features) is cut over tensor-parallel
// ranks: kRows gives rank r rows [r rows/tp, (r+1) rows/tp) (column-parallel layers: wq, wk,
// wv, w1, w3; a vocabulary-parallel table), kColumns the columns [r cols/tp, (r+1) cols/tp) of
// every row (row-parallel layers: wo, w2), kWhole everything (norm gains). Every rank cuts its
// slice from the same whole tensor (InitUniform's, or a checkpoint's), so a model starts
// identical under every tp and its checkpoints can be put back together.
enum class TpSplit { kWhole, kRows, kColumns };

// A tensor's [rows, cols] for the split: a matrix's own; a vector [n] is [n, 1], so a
// column-parallel layer's bias is cut by rows as its weight is, and a norm gain stays whole.
template <typename Shape>
std::pair<int64_t, int64_t> RowsCols(const Shape& shape) {
  if (shape.size() == 2) return {static_cast<int64_t>(shape[0]), static_cast<int64_t>(shape[1])};
  return {shape.empty() ? 1 : static_cast<int64_t>(shape[0]), 1};
}

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

}  // namespace pipecoord

#endif  // PIPECOORD_COMMON_TENSOR_PARALLEL_SPLIT_H_
