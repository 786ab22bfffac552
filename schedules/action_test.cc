#include "schedules/action.h"

#include <gtest/gtest.h>

#include <string>

namespace pipecoord::schedules {
namespace {

TEST(ActionTest, TextFormRoundTrips) {
  for (const char* text : {"2F0", "1B3", "2W1", "0BW12", "1SEND_F3", "3RECV_B0", "0PROBE2", "11OPT0"}) {
    auto a = ParseAction(text);
    ASSERT_TRUE(a.ok()) << text << ": " << a.status().ToString();
    EXPECT_EQ(ToString(*a), text);
  }
  // PyTorch's newer actions: UNSHARD, RESHARD and REDUCE_GRAD name no micro-batch.
  for (const char* text : {"1UNSHARD", "1RESHARD", "2REDUCE_GRAD", "0OVERLAP_F_B3", "0OPT"}) {
    auto a = ParseAction(text);
    ASSERT_TRUE(a.ok()) << text << ": " << a.status().ToString();
    EXPECT_EQ(ToString(*a), text);
  }
  EXPECT_EQ(ParseAction("2REDUCE_GRAD")->mb, -1);
  EXPECT_EQ(ParseAction("1UNSHARD0").status().message(),
            "action \"1UNSHARD0\": UNSHARD takes no micro-batch, e.g. \"1UNSHARD\"");
  EXPECT_FALSE(ParseAction("1UNSHARD1234567890").ok());
  EXPECT_FALSE(ParseAction("0OVERLAP_F_B").ok());  // names its F's micro-batch
  auto a = ParseAction("12SEND_B7");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->op, Op::kSendB);
  EXPECT_EQ(a->stage, 12);
  EXPECT_EQ(a->mb, 7);
}

TEST(ActionTest, BadTextIsRefusedWithTheReason) {
  EXPECT_EQ(ParseAction("F0").status().message(),
            "action \"F0\": expected <stage><op><microbatch>, e.g. \"2F0\" or \"1SEND_B3\"");
  EXPECT_FALSE(ParseAction("1F").ok());
  EXPECT_FALSE(ParseAction("").ok());
  EXPECT_FALSE(ParseAction("12").ok());
  auto bad_op = ParseAction("1X2");
  ASSERT_FALSE(bad_op.ok());
  EXPECT_NE(bad_op.status().message().find("unknown op \"X\""), std::string::npos);
}

TEST(ActionTest, OpClasses) {
  EXPECT_TRUE(IsCompute(Op::kBW));
  EXPECT_FALSE(IsCompute(Op::kSendF));
  EXPECT_TRUE(IsComm(Op::kRecvB));
  EXPECT_FALSE(IsComm(Op::kProbe));
  EXPECT_TRUE(IsSend(Op::kSendB));
  EXPECT_FALSE(IsSend(Op::kRecvF));
  EXPECT_FALSE(IsCompute(Op::kOverlapFB));  // the F and B it opens are
  EXPECT_TRUE(IsPerStage(Op::kReduceGrad));
  EXPECT_FALSE(IsPerStage(Op::kOpt));
  EXPECT_FALSE(TakesMicroBatch(Op::kUnshard));
  EXPECT_TRUE(TakesMicroBatch(Op::kOverlapFB));
  EXPECT_EQ(std::string(OpName(Op::kReduceGrad)), "REDUCE_GRAD");
  EXPECT_EQ(*ParseOp("OVERLAP_F_B"), Op::kOverlapFB);
}

}  // namespace
}  // namespace pipecoord::schedules
