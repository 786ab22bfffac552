#include "proto/op_kinds.h"

#include <gtest/gtest.h>

#include <string>

#include "schedules/action.h"

namespace pipecoord {
namespace {

TEST(OpKindsTest, ComputeIsExactlyFBWAndBW) {
  std::string compute;
  for (int i = v1::Op_MIN; i <= v1::Op_MAX; ++i) {
    if (!v1::Op_IsValid(i)) continue;
    if (v1::IsCompute(static_cast<v1::Op>(i))) compute += v1::Op_Name(static_cast<v1::Op>(i)) + " ";
  }
  EXPECT_EQ(compute, "F B W BW ");
  static_assert(v1::IsCompute(v1::BW) && !v1::IsCompute(v1::OP_UNSPECIFIED));
}

// The wire enum and the schedule IR's enum name the same ops the same way (so the trace colour
// table, keyed by name, colours both alike) and agree on which are compute.
TEST(OpKindsTest, WireOpsAndScheduleOpsAgree) {
  int matched = 0;
  for (int i = v1::Op_MIN; i <= v1::Op_MAX; ++i) {
    const v1::Op op = static_cast<v1::Op>(i);
    if (!v1::Op_IsValid(i) || op == v1::OP_UNSPECIFIED) continue;
    auto s = schedules::ParseOp(v1::Op_Name(op));
    ASSERT_TRUE(s.ok()) << v1::Op_Name(op) << ": " << s.status().ToString();
    EXPECT_EQ(std::string(schedules::OpName(*s)), v1::Op_Name(op));
    EXPECT_EQ(schedules::IsCompute(*s), v1::IsCompute(op)) << v1::Op_Name(op);
    ++matched;
  }
  EXPECT_EQ(matched, schedules::kNumOps);
}

}  // namespace
}  // namespace pipecoord
