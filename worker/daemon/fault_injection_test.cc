#include "worker/daemon/fault_injection.h"

#include <gtest/gtest.h>

namespace pipecoord::worker {
namespace {

TEST(FaultInjection, ParsesEveryKind) {
  auto rules = ParseFaultRules("slow:1:3,hang:0:5,corrupt:2:7,oom:3:1048576");
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  ASSERT_EQ(rules->size(), 4u);
  EXPECT_EQ((*rules)[0].kind, FaultRule::Kind::kSlow);
  EXPECT_EQ((*rules)[0].rank, 1);
  EXPECT_EQ((*rules)[0].factor, 3.0);
  EXPECT_EQ((*rules)[1].kind, FaultRule::Kind::kHang);
  EXPECT_EQ((*rules)[1].step, 5);
  EXPECT_EQ((*rules)[2].kind, FaultRule::Kind::kCorrupt);
  EXPECT_EQ((*rules)[2].step, 7);
  EXPECT_EQ((*rules)[3].kind, FaultRule::Kind::kOom);
  EXPECT_EQ((*rules)[3].bytes, 1048576u);
  EXPECT_EQ((*rules)[3].step, 0);  // from the first step
  EXPECT_EQ(RulesFor(*rules, 2).size(), 1u);
  EXPECT_TRUE(ParseFaultRules("")->empty());
}

TEST(FaultInjection, OomMayStartAtALaterStep) {
  auto rule = ParseFaultRule("oom:1:4096:3");
  ASSERT_TRUE(rule.ok()) << rule.status().ToString();
  EXPECT_EQ(rule->kind, FaultRule::Kind::kOom);
  EXPECT_EQ(rule->bytes, 4096u);
  EXPECT_EQ(rule->step, 3);
}

TEST(FaultInjection, SlowMayStartAtALaterStep) {
  auto rule = ParseFaultRule("slow:2:1.5:10");
  ASSERT_TRUE(rule.ok()) << rule.status().ToString();
  EXPECT_EQ(rule->kind, FaultRule::Kind::kSlow);
  EXPECT_EQ(rule->factor, 1.5);
  EXPECT_EQ(rule->step, 10);
  EXPECT_EQ(ParseFaultRule("slow:2:1.5")->step, 0);  // from the first step
  auto link = ParseFaultRule("slowlink:1:80:8");
  ASSERT_TRUE(link.ok()) << link.status().ToString();
  EXPECT_EQ(link->kind, FaultRule::Kind::kSlowLink);
  EXPECT_EQ(link->rank, 1);
  EXPECT_EQ(link->delay_ms, 80);
  EXPECT_EQ(link->step, 8);
  EXPECT_EQ(ParseFaultRule("slowlink:0:5")->step, 0);
}

TEST(FaultInjection, ErrorsNameTheRuleAndTheRule) {
  EXPECT_EQ(ParseFaultRule("slow:1").status().message(),
            "--inject slow:1: must be KIND:RANK:VALUE with KIND slow, hang, corrupt, flip, oom or slowlink "
            "(slow:RANK:FACTOR[:STEP], flip:RANK:STEP[:MB], oom:RANK:BYTES[:STEP], slowlink:RANK:MS[:STEP])");
  EXPECT_EQ(ParseFaultRule("fast:1:2").status().message(),
            "--inject fast:1:2: KIND must be slow, hang, corrupt, flip, oom or slowlink, got \"fast\"");
  EXPECT_EQ(ParseFaultRule("slow:x:2").status().message(),
            "--inject slow:x:2: RANK must be an integer in [0, 4095], got \"x\"");
  EXPECT_EQ(ParseFaultRule("slow:1:0.5").status().message(),
            "--inject slow:1:0.5: FACTOR must be a number in [1, 1000], got \"0.5\"");
  EXPECT_EQ(ParseFaultRule("hang:1:-2").status().message(),
            "--inject hang:1:-2: STEP must be an integer in [0, 10000000], got \"-2\"");
  EXPECT_EQ(ParseFaultRule("oom:1:0").status().message(),
            "--inject oom:1:0: BYTES must be an integer in [1, 2^40], got \"0\"");
  EXPECT_EQ(ParseFaultRule("oom:1:64:x").status().message(),
            "--inject oom:1:64:x: STEP must be an integer in [0, 10000000], got \"x\"");
  EXPECT_EQ(ParseFaultRule("slow:1:2:x").status().message(),
            "--inject slow:1:2:x: STEP must be an integer in [0, 10000000], got \"x\"");
  EXPECT_EQ(ParseFaultRule("hang:1:2:3").status().message(),
            "--inject hang:1:2:3: must be KIND:RANK:VALUE with KIND slow, hang, corrupt, flip, oom or slowlink "
            "(slow:RANK:FACTOR[:STEP], flip:RANK:STEP[:MB], oom:RANK:BYTES[:STEP], slowlink:RANK:MS[:STEP])");
  EXPECT_EQ(ParseFaultRule("slowlink:1:0").status().message(),
            "--inject slowlink:1:0: MS must be an integer in [1, 60000], got \"0\"");
  EXPECT_EQ(ParseFaultRule("slowlink:1:80:y").status().message(),
            "--inject slowlink:1:80:y: STEP must be an integer in [0, 10000000], got \"y\"");
  EXPECT_EQ(ParseFaultRules("slow:1:2,,").status().message(),
            "--inject : must be KIND:RANK:VALUE with KIND slow, hang, corrupt, flip, oom or slowlink "
            "(slow:RANK:FACTOR[:STEP], flip:RANK:STEP[:MB], oom:RANK:BYTES[:STEP], slowlink:RANK:MS[:STEP])");
}

}  // namespace
}  // namespace pipecoord::worker
