// TensorParallelJoin is TensorParallelSlice's inverse: for each split, the slices a whole tensor
// is cut into (the training split) join back to it bit for bit; bad slices are refused by rank;
// the model's names map to Megatron's splits.
#include "common/tensor_parallel_split.h"

#include <gtest/gtest.h>

#include <vector>

namespace pipecoord {
namespace {

TEST(TensorParallelSplitTest, JoinIsTheInverseOfSlice) {
  const int64_t rows = 6, cols = 4;
  std::vector<float> whole(rows * cols);
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<float>(i) * 0.25f - 3.0f;  // all distinct
  for (TpSplit split : {TpSplit::kWhole, TpSplit::kRows, TpSplit::kColumns}) {
    for (int tp : {1, 2}) {
      std::vector<std::vector<float>> slices;
      for (int r = 0; r < tp; ++r) slices.push_back(TensorParallelSlice(whole, rows, cols, split, tp, r));
      if (split == TpSplit::kWhole && tp > 1) slices.resize(1);  // every rank holds the same
      auto joined = TensorParallelJoin(slices, rows, cols, split);
      ASSERT_TRUE(joined.ok()) << joined.status().ToString();
      EXPECT_EQ(*joined, whole) << static_cast<int>(split) << " tp " << tp;
    }
  }
  // Two column slices: the joined rows interleave them (not one after the other).
  const auto left = TensorParallelSlice(whole, rows, cols, TpSplit::kColumns, 2, 0);
  EXPECT_EQ(left.size(), 12u);
  EXPECT_EQ(left[2], whole[4]);  // row 1, column 0
  EXPECT_EQ(TpSplitOf("layers.3.attention.wo.weight"), TpSplit::kColumns);
  EXPECT_EQ(TpSplitOf("layers.3.feed_forward.w1.weight"), TpSplit::kRows);
  EXPECT_EQ(TpSplitOf("norm.weight"), TpSplit::kWhole);
  auto bad = TensorParallelJoin({left, std::vector<float>(5)}, rows, cols, TpSplit::kColumns);
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "tensor-parallel rank 1's slice holds 5 elements, expected 12");
}

}  // namespace
}  // namespace pipecoord
