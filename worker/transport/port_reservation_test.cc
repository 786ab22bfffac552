#include "worker/transport/port_reservation.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

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

// A worker takes its data port back after a job: the job's accepted connections, closed by the
// worker first, leave TIME_WAIT entries on the port (every job logged "could not hold the data
// port again: Address already in use" before).
TEST(PortReservationTest, TakesThePortBackWhileClosedConnectionsLingerInTimeWait) {
  auto held = PortReservation::Bind("127.0.0.1", 0);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  const int port = held->port();
  held->Release();
  // A listener as the job's (Boost.Asio's acceptor sets SO_REUSEADDR), one connection accepted
  // and closed by the listening side first: its end of the connection goes to TIME_WAIT.
  const int one = 1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  ASSERT_EQ(::listen(listener, 1), 0);
  const int dialer = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::connect(dialer, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  const int accepted = ::accept(listener, nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  ::close(accepted);  // the active close: TIME_WAIT on the listening side's port
  char byte;
  EXPECT_EQ(::recv(dialer, &byte, 1, 0), 0);  // the dialer sees the end, then closes too
  ::close(dialer);
  ::close(listener);
  // What a port held without SO_REUSEADDR meets here (the state the fix is for).
  const int plain = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_NE(::bind(plain, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << "no TIME_WAIT entry was left";
  ::close(plain);
  auto again = PortReservation::Bind("127.0.0.1", port);
  EXPECT_TRUE(again.ok()) << again.status().ToString();
  // Held again: a plain bind there is refused, and binds to port 0 (the kernel skips bound ports)
  // never get it. (A listener that asks for this very port with SO_REUSEADDR could: the limit
  // the header states.)
  const int other = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_NE(::bind(other, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << "a plain bind got a held port";
  ::close(other);
  std::vector<PortReservation> picked;
  for (int i = 0; i < 200; ++i) {
    auto any = PortReservation::Bind("127.0.0.1", 0);
    ASSERT_TRUE(any.ok());
    EXPECT_NE(any->port(), port);
    picked.push_back(std::move(any).value());
  }
}

}  // namespace
}  // namespace pipecoord::worker
