#include "schedules/validator.h"

#include <gtest/gtest.h>

#include "schedules/comm_pass.h"
#include "schedules/test_util.h"

namespace pipecoord::schedules {
namespace {

using testing::MustGenerate;
using testing::Spec;

Schedule TwoRanks() { return MustGenerate("1f1b", Spec(2, 2)); }

std::string Error(const Schedule& s) { return Validate(s).message(); }

TEST(ValidatorTest, AcceptsGeneratedSchedules) {
  EXPECT_TRUE(Validate(TwoRanks()).ok());
  auto with_comm = AddCommunication(TwoRanks(), CostModel{});
  ASSERT_TRUE(with_comm.ok());
  EXPECT_TRUE(Validate(*with_comm).ok());
}

TEST(ValidatorTest, ActionOnTheWrongRank) {
  Schedule s = TwoRanks();
  s.ranks[0][1] = {Op::kF, 1, 1};
  EXPECT_EQ(Error(s), "rank 0, position 1 (1F1): stage 1 is placed on rank 1");
}

TEST(ValidatorTest, DuplicateAndMissingActions) {
  Schedule s = TwoRanks();
  s.ranks[1].push_back({Op::kF, 1, 0});
  EXPECT_EQ(Error(s),
            "rank 1, position 4 (1F0): a second F for stage 1 micro-batch 0 (the first is at "
            "rank 1, position 0 (1F0))");
  s = TwoRanks();
  s.ranks[0].pop_back();
  EXPECT_EQ(Error(s), "stage 0 micro-batch 1 has no B or BW");
  s = TwoRanks();
  s.ranks[1][1] = {Op::kB, 1, 0};
  EXPECT_EQ(Error(s), "stage 1 micro-batch 0 has a B but no W");
  s.ranks[1].push_back({Op::kW, 1, 0});
  s.ranks[1].push_back({Op::kBW, 1, 0});
  EXPECT_EQ(Error(s), "stage 1 micro-batch 0 has both a BW and a split B/W backward");
}

TEST(ValidatorTest, OutOfRangeFields) {
  Schedule s = TwoRanks();
  s.ranks[0][0].mb = 9;
  EXPECT_EQ(Error(s), "rank 0, position 0 (0F9): micro-batch must be in 0..1");
  s = TwoRanks();
  s.stage_to_rank[1] = 5;
  EXPECT_EQ(Error(s), "stage_to_rank[1]: rank 5 is not in 0..1");
}

TEST(ValidatorTest, BackwardBeforeItsForwardOnTheSameRank) {
  Schedule s = TwoRanks();
  std::swap(s.ranks[1][0], s.ranks[1][1]);  // 1BW0 before 1F0
  EXPECT_EQ(Error(s), "rank 1, position 0 (1BW0): runs before the 1F0 it needs, at position 1");
}

TEST(ValidatorTest, WBeforeB) {
  Schedule s = MakeSchedule("hand", 1, 1, 1, LoopedPlacement(1, 1));
  s.ranks[0] = {{Op::kF, 0, 0}, {Op::kW, 0, 0}, {Op::kB, 0, 0}};
  EXPECT_EQ(Error(s), "rank 0, position 1 (0W0): runs before the 0B0 it needs, at position 2");
}

TEST(ValidatorTest, CrossRankCycleIsADeadlock) {
  Schedule s = TwoRanks();
  // Rank 0 wants micro-batch 1's gradient before it has sent micro-batch 1 forward.
  s.ranks[0] = {{Op::kF, 0, 0}, {Op::kBW, 0, 1}, {Op::kF, 0, 1}, {Op::kBW, 0, 0}};
  EXPECT_NE(Error(s).find("rank 0, position 1 (0BW1): runs before the 0F1"), std::string::npos);
  s.ranks[0] = {{Op::kF, 0, 0}, {Op::kBW, 0, 0}, {Op::kF, 0, 1}, {Op::kBW, 0, 1}};
  s.ranks[1] = {{Op::kF, 1, 1}, {Op::kBW, 1, 1}, {Op::kF, 1, 0}, {Op::kBW, 1, 0}};
  EXPECT_EQ(Error(s),
            "deadlock: schedule cannot finish, an input is never produced: rank 0 waits at "
            "position 1 (0BW0); rank 1 waits at position 0 (1F1)");
}

TEST(ValidatorTest, CommunicationRules) {
  auto good = AddCommunication(TwoRanks(), CostModel{});
  ASSERT_TRUE(good.ok());
  // "0F0 0SEND_F0>1 0F1 0SEND_F1>1 0RECV_B0<1 0BW0 0RECV_B1<1 0BW1"
  Schedule s = *good;
  s.ranks[0][1].peer = 0;
  EXPECT_EQ(Error(s), "rank 0, position 1 (0SEND_F0): peer must be another rank in 0..1, got 0");
  s = *good;
  s.ranks[0].erase(s.ranks[0].begin() + 1);
  EXPECT_EQ(Error(s), "rank 0, position 0 (0F0): no SEND_F of its result");
  s = *good;
  std::swap(s.ranks[0][4], s.ranks[0][5]);
  EXPECT_EQ(Error(s), "rank 0, position 4 (0BW0): runs before its RECV_B at position 5");
  s = *good;
  std::swap(s.ranks[0][0], s.ranks[0][1]);
  EXPECT_EQ(Error(s), "rank 0, position 0 (0SEND_F0): sends before 0F0 produced it");
}

TEST(ValidatorTest, BlockingSendRecvDeadlock) {
  // Both ranks send first: each waits for the other to post its receive.
  Schedule s = MakeSchedule("hand", 2, 1, 2, LoopedPlacement(2, 1));
  s.ranks[0] = {{Op::kF, 0, 0}, {Op::kSendF, 0, 0, 1}, {Op::kF, 0, 1}, {Op::kSendF, 0, 1, 1},
                {Op::kRecvB, 0, 0, 1}, {Op::kBW, 0, 0}, {Op::kRecvB, 0, 1, 1}, {Op::kBW, 0, 1}};
  s.ranks[1] = {{Op::kRecvF, 1, 0, 0}, {Op::kF, 1, 0}, {Op::kBW, 1, 0}, {Op::kSendB, 1, 0, 0},
                {Op::kRecvF, 1, 1, 0}, {Op::kF, 1, 1}, {Op::kBW, 1, 1}, {Op::kSendB, 1, 1, 0}};
  EXPECT_EQ(Error(s),
            "deadlock under blocking send/recv: rank 0, position 3 (0SEND_F1) waits for rank 1; "
            "rank 1, position 3 (1SEND_B0) waits for rank 0");
}

}  // namespace
}  // namespace pipecoord::schedules
