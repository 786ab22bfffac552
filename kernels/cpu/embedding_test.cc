#include "kernels/cpu/embedding.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/cpu/gradient_check.h"

namespace pipecoord::kernels::cpu {
namespace {

using testing::Inner;
using testing::NumericGradient;
using testing::RandomVector;
using testing::RelativeError;
using testing::ReportError;

TEST(EmbeddingTest, ForwardGathersRowsAndBackwardScattersThemBack) {
  const std::vector<float> table = {0, 1, 10, 11, 20, 21};  // vocab 3, dim 2
  const std::vector<int32_t> ids = {2, 0, 2};
  std::vector<float> out(6);
  EmbeddingForward(table.data(), ids.data(), out.data(), 3, 2);
  EXPECT_EQ(out, (std::vector<float>{20, 21, 0, 1, 20, 21}));
  std::vector<float> dtable(6, 1.0f);
  const std::vector<float> dout = {1, 2, 3, 4, 5, 6};
  EmbeddingBackwardWeight(dout.data(), ids.data(), dtable.data(), 3, 2);
  EXPECT_EQ(dtable, (std::vector<float>{4, 5, 1, 1, 7, 9}));  // row 2 gets tokens 0 and 2
}

TEST(EmbeddingTest, WeightGradientMatchesFiniteDifferences) {
  const int64_t vocab = 5, dim = 3;
  const std::vector<int32_t> ids = {4, 1, 1, 0, 4, 4};
  std::vector<double> table = RandomVector(vocab * dim, 61);
  const std::vector<double> r = RandomVector(ids.size() * dim, 62);
  std::vector<double> out(r.size());
  auto objective = [&] {
    EmbeddingForward(table.data(), ids.data(), out.data(), 6, dim);
    return Inner(out, r);
  };
  std::vector<double> dtable(table.size(), 0.0);
  EmbeddingBackwardWeight(r.data(), ids.data(), dtable.data(), 6, dim);
  const double e = RelativeError(dtable, NumericGradient(objective, &table, 1e-6));
  ReportError("embedding dtable (W)", e);
  EXPECT_LT(e, 1e-9);
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
