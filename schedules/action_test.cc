#include "schedules/action.h"

#include <gtest/gtest.h>

namespace pipecoord::schedules {
namespace {

TEST(ActionTest, TextFormRoundTrips) {
  for (const char* text : {"2F0", "1B3", "2W1", "0BW12", "1SEND_F3", "3RECV_B0", "0PROBE2", "11OPT0"}) {
    auto a = ParseAction(text);
    ASSERT_TRUE(a.ok()) << text << ": " << a.status().ToString();
    EXPECT_EQ(ToString(*a), text);
  }
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
}

}  // namespace
}  // namespace pipecoord::schedules
