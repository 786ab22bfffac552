#include "worker/transport/port_reservation.h"

#include <gtest/gtest.h>

#include "worker/transport/tcp_transport.h"

namespace pipecoord::worker {
namespace {

// Held: nobody else binds or listens there, and a dialer is refused; released: a transport
// listens there.
TEST(PortReservationTest, HoldsThePortWithoutAcceptingThenLetsItGo) {
  auto held = PortReservation::Bind("127.0.0.1", 0);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  const int port = held->port();
  ASSERT_GT(port, 0);
  auto again = PortReservation::Bind("127.0.0.1", port);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kUnavailable);
  EXPECT_NE(again.status().message().find("reserving 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << again.status().message();
  EXPECT_FALSE(TcpTransport::Listen("127.0.0.1", port).ok()) << "another listener got a held port";
  auto dialer = TcpTransport::Listen("127.0.0.1", 0);
  ASSERT_TRUE(dialer.ok());
  const Status refused = (*dialer)->Connect(1, {{0, "127.0.0.1:" + std::to_string(port)}}, 0, std::chrono::milliseconds(300));
  EXPECT_FALSE(refused.ok()) << "a held port accepted a connection";
  held->Release();
  auto listening = TcpTransport::Listen("127.0.0.1", port);
  EXPECT_TRUE(listening.ok()) << listening.status().ToString();
  EXPECT_EQ(PortReservation::Bind("worker-3", 0).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace pipecoord::worker
