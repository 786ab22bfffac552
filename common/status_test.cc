#include "common/status.h"

#include <gtest/gtest.h>

namespace pipecoord {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("x: must be even, got " + std::to_string(x));
  return x / 2;
}

Status Chain(int x, int* out) {
  auto r = Half(x);
  PIPECOORD_RETURN_IF_ERROR(r.status());
  *out = *r;
  return Status::Ok();
}

TEST(StatusTest, ResultCarriesValueOrError) {
  EXPECT_EQ(*Half(8), 4);
  auto bad = Half(3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.status().ToString(), "INVALID_ARGUMENT: x: must be even, got 3");
}

TEST(StatusTest, ReturnIfErrorStopsAtTheFirstError) {
  int out = -1;
  EXPECT_TRUE(Chain(10, &out).ok());
  EXPECT_EQ(out, 5);
  out = -1;
  EXPECT_EQ(Chain(7, &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(out, -1);
}

}  // namespace
}  // namespace pipecoord
