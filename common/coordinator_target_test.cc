#include "common/coordinator_target.h"

#include <gtest/gtest.h>

namespace pipecoord {
namespace {

TEST(CoordinatorTargetTest, OneAddressIsUsedAsGiven) {
  auto t = ResolveCoordinatorTarget("--coordinator", "coordinator.pipecoord.svc:50051");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->target, "coordinator.pipecoord.svc:50051");
  EXPECT_EQ(t->authority, "");
}

TEST(CoordinatorTargetTest, SeveralBecomeOneAddressList) {
  auto t = ResolveCoordinatorTarget("--coordinator", "127.0.0.1:7001,localhost:7002,127.0.0.3:7003");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->target, "ipv4:127.0.0.1:7001,127.0.0.1:7002,127.0.0.3:7003");
  EXPECT_EQ(t->authority, "127.0.0.1:7001");
  auto v6 = ResolveCoordinatorTarget("--coordinator", "[::1]:7001,[::1]:7002");
  ASSERT_TRUE(v6.ok()) << v6.status().ToString();
  EXPECT_EQ(v6->target, "ipv6:[::1]:7001,[::1]:7002");
}

TEST(CoordinatorTargetTest, BadEntriesAreNamed) {
  for (const char* bad : {"127.0.0.1:7001,", "127.0.0.1:7001,127.0.0.1", "a:1,:2", "127.0.0.1:1,127.0.0.1:x"}) {
    auto t = ResolveCoordinatorTarget("--coordinator", bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(t.status().message().rfind("--coordinator: ", 0), 0u) << t.status().message();
  }
  auto t = ResolveCoordinatorTarget("--coordinator", "127.0.0.1:1,no-such-host.invalid:2");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("cannot resolve \"no-such-host.invalid\""), std::string::npos);
  auto mixed = ResolveCoordinatorTarget("--coordinator", "127.0.0.1:1,[::1]:2");
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("must all be IPv4 or all IPv6"), std::string::npos) << mixed.status().message();
}

}  // namespace
}  // namespace pipecoord
