#include "schedules/v_rank_list.h"

#include <gtest/gtest.h>

#include "schedules/test_util.h"

namespace pipecoord::schedules {
namespace {

TEST(VRankListTest, CountsMicroBatchesPerChunkAndOwesWeights) {
  VRankList v(3, 1);  // stages 1 and 4
  EXPECT_EQ(v.Stage(0), 1);
  EXPECT_EQ(v.Stage(1), 4);
  v.Forward(0);
  v.Forward(1);
  v.Forward(0);
  v.Backward(1);
  v.FullBackward(0);
  v.Backward(0);
  EXPECT_EQ(v.Owed(0), 1);
  EXPECT_EQ(v.Owed(1), 1);
  v.OldestWeight();  // 4W0, owed before 1W1
  v.Weight(0);
  v.Weight(0);  // nothing owed: adds nothing
  EXPECT_EQ(testing::RankText(std::move(v).Take(2)), "1F0 4F0 1F1 4B0 1B0 1W0 1B1 4W0 1W1");
}

TEST(VRankListTest, TakeDropsPaddedMicroBatches) {
  VRankList v(1, 0);
  for (int i = 0; i < 3; ++i) v.Forward(0);
  EXPECT_EQ(testing::RankText(std::move(v).Take(2)), "0F0 0F1");
}

}  // namespace
}  // namespace pipecoord::schedules
