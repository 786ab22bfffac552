#include "common/tensor_parallel_split.h"

#include <algorithm>
#include <string>

namespace pipecoord {

TpSplit TpSplitOf(std::string_view name) {
  for (std::string_view rows : {"attention.wq.", "attention.wk.", "attention.wv.", "feed_forward.w1.",
                                "feed_forward.w3.", "output.", "tok_embeddings."}) {
    if (name.find(rows) != std::string_view::npos) return TpSplit::kRows;
  }
  for (std::string_view cols : {"attention.wo.", "feed_forward.w2."}) {
    if (name.find(cols) != std::string_view::npos) return TpSplit::kColumns;
  }
  return TpSplit::kWhole;
}

std::vector<float> TensorParallelSlice(std::span<const float> whole, int64_t rows, int64_t cols, TpSplit split,
                                       int tp, int rank) {
  if (split == TpSplit::kWhole || tp == 1) return {whole.begin(), whole.end()};
  if (split == TpSplit::kRows) {
    const int64_t n = rows / tp;
    return {whole.begin() + rank * n * cols, whole.begin() + (rank + 1) * n * cols};
  }
  const int64_t n = cols / tp;
  std::vector<float> out(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(whole.begin() + r * cols + rank * n, whole.begin() + r * cols + (rank + 1) * n, out.begin() + r * n);
  }
  return out;
}

Result<std::vector<float>> TensorParallelJoin(const std::vector<std::vector<float>>& slices, int64_t rows, int64_t cols,
                                              TpSplit split) {
  const int64_t tp = static_cast<int64_t>(slices.size());
  if (tp == 0) return InvalidArgument("no slices to join");
  const bool whole = split == TpSplit::kWhole || tp == 1;
  const int64_t each = whole ? rows * cols : rows * cols / tp;
  for (int64_t r = 0; r < tp; ++r) {
    if (static_cast<int64_t>(slices[r].size()) != each) {
      return InvalidArgument("tensor-parallel rank " + std::to_string(r) + "'s slice holds " +
                             std::to_string(slices[r].size()) + " elements, expected " + std::to_string(each));
    }
  }
  if (whole) return slices[0];
  std::vector<float> out;
  out.reserve(static_cast<size_t>(rows * cols));
  if (split == TpSplit::kRows) {  // row blocks, one after the other
    for (const auto& s : slices) out.insert(out.end(), s.begin(), s.end());
    return out;
  }
  const int64_t n = cols / tp;  // each row: every rank's columns in turn
  for (int64_t r = 0; r < rows; ++r) {
    for (const auto& s : slices) out.insert(out.end(), s.begin() + r * n, s.begin() + (r + 1) * n);
  }
  return out;
}

}  // namespace pipecoord
