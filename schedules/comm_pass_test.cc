#include "schedules/comm_pass.h"

#include <gtest/gtest.h>

#include "schedules/test_util.h"

namespace pipecoord::schedules {
namespace {

using testing::MustGenerate;
using testing::RankText;
using testing::Spec;

TEST(CommPassTest, OneFOneBP2M2ExactOrder) {
  auto s = AddCommunication(MustGenerate("1f1b", Spec(2, 2)), CostModel{});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(RankText(s->ranks[0]),
            "0F0 0SEND_F0>1 0F1 0SEND_F1>1 0RECV_B0<1 0BW0 0RECV_B1<1 0BW1");
  EXPECT_EQ(RankText(s->ranks[1]),
            "1RECV_F0<0 1RECV_F1<0 1F0 1BW0 1SEND_B0>0 1F1 1BW1 1SEND_B1>0");
  EXPECT_TRUE(Validate(*s).ok()) << Validate(*s).ToString();
}

TEST(CommPassTest, SameRankStagesNeedNoTransfer) {
  Schedule s = MakeSchedule("hand", 1, 2, 1, LoopedPlacement(1, 2));
  s.ranks[0] = {{Op::kF, 0, 0}, {Op::kF, 1, 0}, {Op::kBW, 1, 0}, {Op::kBW, 0, 0}};
  auto out = AddCommunication(s, CostModel{});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(RankText(out->ranks[0]), "0F0 1F0 1BW0 0BW0");
}

// Blocking-send safety for every built-in pipeline shape we have, with costs that reorder
// transfers (slow comm, slow backward).
TEST(CommPassTest, ResultRunsUnderBlockingSendRecv) {
  for (const char* name : {"1f1b", "fthenb", "eager-1f1b"}) {
    for (int p = 2; p <= 6; ++p) {
      for (int m : {1, p - 1, p, 2 * p + 1}) {
        if (m < 1) continue;
        for (double comm : {0.0, 0.3, 2.0}) {
          ScheduleSpec spec = Spec(p, m);
          spec.costs.comm = comm;
          spec.costs.b = 2.5;
          auto s = BuildSchedule(name, spec);
          EXPECT_TRUE(s.ok()) << name << " p=" << p << " m=" << m << " comm=" << comm << ": "
                              << s.status().ToString();
        }
      }
    }
  }
}

TEST(CommPassTest, RefusesAScheduleThatAlreadyCommunicates) {
  auto s = AddCommunication(MustGenerate("1f1b", Spec(2, 2)), CostModel{});
  ASSERT_TRUE(s.ok());
  auto again = AddCommunication(*s, CostModel{});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kFailedPrecondition);
}

}  // namespace
}  // namespace pipecoord::schedules
