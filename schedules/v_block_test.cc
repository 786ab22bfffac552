#include "schedules/v_block.h"

#include <gtest/gtest.h>

#include "schedules/test_util.h"

namespace pipecoord::schedules {
namespace {

TEST(VBlockTest, RefusesABrokenBlock) {
  // p = 2, V-Min's block: rank 0 at 0, 3, 4, 7; rank 1 at 1, 2, 5, 6.
  std::vector<VBlockRow> block = {{0, 3, 4, 7}, {1, 2, 5, 6}};
  EXPECT_TRUE(CheckVBlock(block).ok());
  block[0].b_down = 6;  // 6 = 0 modulo 6: micro-batch 1's F would land on micro-batch 0's B
  EXPECT_EQ(CheckVBlock(block).message(),
            "V building block, rank 0: two passes share a slot modulo 6, so consecutive micro-batches collide");
  block[0].b_down = 5;  // before rank 1's B on chunk 0, at 6: its input
  EXPECT_EQ(CheckVBlock(block).message(), "V building block, rank 0: B on chunk 0 runs before its inputs");
  block = {{0, 3, 4, 7}, {1, 0, 5, 6}};
  EXPECT_EQ(CheckVBlock(block).code(), Code::kInternal);
}

TEST(VBlockTest, RowsMustMatchTheRanks) {
  auto s = ScheduleFromVBlock(testing::Spec(3, 4, 2), "v-test", {{0, 3, 4, 7}, {1, 2, 5, 6}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "V building block: needs one row per rank (3), got 2");
}

TEST(VBlockTest, TightBlockNeedsNoSqueeze) {
  // One rank, F0 F1 B1 B0 back to back, W's after: the order is the block's.
  auto s = ScheduleFromVBlock(testing::Spec(1, 2, 2), "v-test", {{0, 1, 2, 3}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(testing::RankText(s->ranks[0]), "0F0 1F0 1B0 0B0 1W0 0W0 0F1 1F1 1B1 0B1 1W1 0W1");
  EXPECT_TRUE(Validate(*s).ok());
}

}  // namespace
}  // namespace pipecoord::schedules
