// TCP transport speed on loopback, each figure next to a baseline measured in the same run:
//  - throughput: 64 messages of 4 MiB from one TcpTransport to another (send queued from one
//    thread, received on another) against a plain memcpy of the same bytes into fresh buffers;
//  - latency: round trips of a one-float message (ping-pong through Send/Recv) against the
//    same ping-pong of the same frame bytes over a raw blocking TCP socket pair.
//   bazel run -c opt //bench:transport_bench
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "worker/transport/frame.h"
#include "worker/transport/tcp_transport.h"

namespace {

using namespace pipecoord;
using namespace pipecoord::worker;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kMessageFloats = size_t{1} << 20;  // 4 MiB
constexpr int kMessages = 64;
constexpr int kRoundTrips = 2000;
constexpr int kReps = 3;
constexpr milliseconds kTimeout(30000);

void Check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Best of kReps: the time from the first Send to the last message received.
double TransportThroughput(TcpTransport& a, TcpTransport& b) {
  double best = 1e100;
  for (int rep = 0; rep < kReps; ++rep) {
    std::vector<std::vector<float>> out(kMessages, std::vector<float>(kMessageFloats, 1.5f));
    const auto t0 = Clock::now();
    std::thread sender([&] {
      for (int i = 0; i < kMessages; ++i) {
        Check(a.SendFloats(1, MessageTag{0, 0, i, rep}, std::move(out[i])), "send");
      }
    });
    for (int i = 0; i < kMessages; ++i) {
      auto got = b.RecvFloats(0, MessageTag{0, 0, i, rep}, kMessageFloats, kTimeout);
      Check(got.status(), "recv");
      if (got->size() != kMessageFloats || (*got)[kMessageFloats - 1] != 1.5f) {
        std::fprintf(stderr, "message %d arrived damaged\n", i);
        std::exit(1);
      }
    }
    const auto t1 = Clock::now();
    sender.join();
    best = std::min(best, Seconds(t0, t1));
  }
  return best;
}

double MemcpyBaseline() {
  std::vector<std::vector<float>> src(kMessages, std::vector<float>(kMessageFloats, 1.5f));
  std::vector<std::vector<float>> dst(kMessages, std::vector<float>(kMessageFloats, 0.f));
  volatile float sink = 0;
  const double t = bench::BestOf(kReps, [&] {
    for (int i = 0; i < kMessages; ++i) {
      std::memcpy(dst[i].data(), src[i].data(), kMessageFloats * sizeof(float));
    }
    sink = sink + dst[kMessages - 1][0];
  });
  return t;
}

double TransportRoundTrips(TcpTransport& a, TcpTransport& b) {
  std::thread echo([&] {
    for (int i = 0; i < kRoundTrips; ++i) {
      auto got = b.Recv(0, MessageTag{2, 0, i, 0}, {kernels::DType::kF32, {1}}, kTimeout);
      Check(got.status(), "echo recv");
      Check(b.Send(0, MessageTag{2, 1, i, 0}, std::move(*got)), "echo send");
    }
  });
  const auto t0 = Clock::now();
  for (int i = 0; i < kRoundTrips; ++i) {
    Check(a.SendFloats(1, MessageTag{2, 0, i, 0}, {static_cast<float>(i)}), "ping");
    Check(a.RecvFloats(1, MessageTag{2, 1, i, 0}, 1, kTimeout).status(), "pong");
  }
  const auto t1 = Clock::now();
  echo.join();
  return Seconds(t0, t1);
}

// Context for the throughput line: the same bytes through a plain blocking socket pair, which
// is what the kernel's loopback allows without framing, queues or threads.
double RawThroughput() {
  namespace asio = boost::asio;
  using tcp = asio::ip::tcp;
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket client(io), server(io);
  client.connect(acceptor.local_endpoint());
  acceptor.accept(server);
  std::vector<float> src(kMessageFloats, 1.5f), dst(kMessageFloats);
  return bench::BestOf(kReps, [&] {
    std::thread reader([&] {
      for (int i = 0; i < kMessages; ++i) asio::read(server, asio::buffer(dst));
    });
    for (int i = 0; i < kMessages; ++i) asio::write(client, asio::buffer(src));
    reader.join();
  });
}

// The same frame bytes (header + one float) bounced over plain blocking sockets.
double RawRoundTrips() {
  namespace asio = boost::asio;
  using tcp = asio::ip::tcp;
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket client(io), server(io);
  client.connect(acceptor.local_endpoint());
  acceptor.accept(server);
  client.set_option(tcp::no_delay(true));
  server.set_option(tcp::no_delay(true));
  constexpr size_t kBytes = kFrameHeaderBytes + sizeof(float);
  std::thread echo([&] {
    char buf[kBytes];
    for (int i = 0; i < kRoundTrips; ++i) {
      asio::read(server, asio::buffer(buf));
      asio::write(server, asio::buffer(buf));
    }
  });
  char buf[kBytes] = {};
  const auto t0 = Clock::now();
  for (int i = 0; i < kRoundTrips; ++i) {
    asio::write(client, asio::buffer(buf));
    asio::read(client, asio::buffer(buf));
  }
  const auto t1 = Clock::now();
  echo.join();
  return Seconds(t0, t1);
}

}  // namespace

int main() {
  auto a = TcpTransport::Listen("127.0.0.1", 0);
  auto b = TcpTransport::Listen("127.0.0.1", 0);
  Check(a.status(), "listen");
  Check(b.status(), "listen");
  const std::map<int, std::string> peers = {{0, (*a)->endpoint()}, {1, (*b)->endpoint()}};
  Status sb;
  std::thread tb([&] { sb = (*b)->Connect(1, peers, kTimeout); });
  Check((*a)->Connect(0, peers, kTimeout), "connect");
  tb.join();
  Check(sb, "connect");

  bool ok = true;
  const double bytes = static_cast<double>(kMessages) * kMessageFloats * sizeof(float);
  const double t = TransportThroughput(**a, **b);
  const double base = MemcpyBaseline();
  const double raw_t = RawThroughput();
  std::printf("throughput: %.2f GiB/s TcpTransport, %.2f GiB/s raw blocking TCP, %.2f GiB/s memcpy\n",
              bytes / t / (1 << 30), bytes / raw_t / (1 << 30), bytes / base / (1 << 30));
  // Target: at least 1 GiB/s, so a 4 MiB activation costs under 4 ms to move.
  ok &= bench::Report("64 x 4 MiB messages, TcpTransport", t, 0.25, "memcpy of the same bytes", base);

  double rt = 1e100, raw = 1e100;
  for (int rep = 0; rep < kReps; ++rep) {
    rt = std::min(rt, TransportRoundTrips(**a, **b));
    raw = std::min(raw, RawRoundTrips());
  }
  std::printf("latency: %.1f us per round trip (TcpTransport), %.1f us (raw blocking TCP)\n",
              rt / kRoundTrips * 1e6, raw / kRoundTrips * 1e6);
  // Target: under 200 us per round trip of a small message.
  ok &= bench::Report("2000 round trips of 1 float, TcpTransport", rt, 0.4,
                      "raw blocking TCP ping-pong", raw);
  (*a)->Shutdown();
  (*b)->Shutdown();
  return ok ? 0 : 1;
}
