#include "worker/transport/endpoint.h"

#include <gtest/gtest.h>

namespace pipecoord::worker {
namespace {

TEST(EndpointTest, ParsesHostAndPort) {
  auto hp = ParseHostPort("127.0.0.1:4000");
  ASSERT_TRUE(hp.ok()) << hp.status().ToString();
  EXPECT_EQ(hp->host, "127.0.0.1");
  EXPECT_EQ(hp->port, 4000);
  hp = ParseHostPort("[::1]:0");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "::1");
  EXPECT_EQ(hp->port, 0);
  hp = ParseHostPort("worker-3.pipecoord:65535");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "worker-3.pipecoord");
}

TEST(EndpointTest, RejectsBadText) {
  for (const char* bad : {"", "host", ":80", "host:", "host:x", "host:65536", "host:-1",
                          "::1:80", "host:80x"}) {
    auto hp = ParseHostPort(bad);
    ASSERT_FALSE(hp.ok()) << bad;
    EXPECT_EQ(hp.status().code(), Code::kInvalidArgument);
    EXPECT_NE(hp.status().message().find("is not HOST:PORT"), std::string::npos);
  }
}

TEST(EndpointTest, Formats) {
  EXPECT_EQ(FormatHostPort("127.0.0.1", 80), "127.0.0.1:80");
  EXPECT_EQ(FormatHostPort("::1", 80), "[::1]:80");
}

}  // namespace
}  // namespace pipecoord::worker
