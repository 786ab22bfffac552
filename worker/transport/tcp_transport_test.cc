#include "worker/transport/tcp_transport.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <optional>
#include <random>
#include <thread>

#include "worker/transport/endpoint.h"
#include "worker/transport/frame.h"
#include "worker/transport/test_util.h"

namespace pipecoord::worker {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using testing::ElapsedMs;
using testing::MakeMesh;
using testing::RecvAll;
using ::testing::HasSubstr;

constexpr milliseconds kLong(10000);  // never reached when things work

// A payload that names its sender and tag, so a test can check each message landed right.
std::vector<float> Payload(int from, const MessageTag& tag, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>(from * 1000000 + static_cast<int>(tag.channel) * 100000 +
                              tag.stage * 10000 + tag.mb * 100 + tag.step * 10 + static_cast<int>(i % 7));
  }
  return v;
}

size_t SizeOf(const MessageTag& tag) { return static_cast<size_t>((tag.mb * 13 + tag.stage) % 50); }

std::vector<MessageTag> ManyTags() {
  std::vector<MessageTag> tags;
  for (uint32_t c = 0; c < 2; ++c)
    for (int s = 0; s < 4; ++s)
      for (int mb = 0; mb < 10; ++mb)
        for (int step = 0; step < 3; ++step) tags.push_back(MessageTag{c, s, mb, step});
  return tags;
}

// A hand-driven connection: what a buggy, stale or hostile peer would send.
class RawPeer {
 public:
  explicit RawPeer(const std::string& endpoint) : socket_(io_) {
    auto hp = ParseHostPort(endpoint);
    socket_.connect(asio::ip::tcp::endpoint(asio::ip::make_address(hp->host),
                                            static_cast<uint16_t>(hp->port)));
  }
  void Write(const HeaderBytes& h) { asio::write(socket_, asio::buffer(h)); }
  void Write(const void* data, size_t n) { asio::write(socket_, asio::buffer(data, n)); }

  // The next frame header, or nothing if the connection closed or `timeout` passed.
  std::optional<FrameHeader> ReadHeader(milliseconds timeout) {
    HeaderBytes b;
    size_t got = 0;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (got < b.size()) {
      if (!WaitReadable(deadline)) return std::nullopt;
      boost::system::error_code ec;
      size_t n = socket_.read_some(asio::buffer(b.data() + got, b.size() - got), ec);
      if (ec) return std::nullopt;
      got += n;
    }
    return DecodeHeader(b);
  }

  // True when the other end closes the connection within `timeout` (data before is skipped).
  bool ClosedWithin(milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    for (;;) {
      if (!WaitReadable(deadline)) return false;
      boost::system::error_code ec;
      socket_.read_some(asio::buffer(buf), ec);
      if (ec) return true;
    }
  }

 private:
  bool WaitReadable(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{socket_.native_handle(), POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(left.count())) > 0;
  }

  asio::io_context io_;
  asio::ip::tcp::socket socket_;
};

// ---------------------------------------------------------------------------------------------
// Exchanging messages.

TEST(TcpTransportTest, TwoRanksExchangeManyMessagesInShuffledOrder) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  auto& t = *mesh;
  const std::vector<MessageTag> tags = ManyTags();  // 240 per direction
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int me = 0; me < 2; ++me) {
    const int other = 1 - me;
    // Receiver: starts waiting before anything is sent, in its own shuffled order.
    threads.emplace_back([&, me, other] {
      std::vector<MessageTag> order = tags;
      std::shuffle(order.begin(), order.end(), std::mt19937(100 + me));
      for (const MessageTag& tag : order) {
        auto got = RecvAll(*t[me], other, tag, kLong);
        if (!got.ok() || *got != Payload(other, tag, SizeOf(tag))) {
          ADD_FAILURE() << "rank " << me << " " << ToString(tag) << ": "
                        << got.status().ToString();
          ++failures;
          return;
        }
      }
    });
    // Sender: another shuffled order, in bursts, so some receives wait and some find the
    // message already buffered.
    threads.emplace_back([&, me, other] {
      std::this_thread::sleep_for(milliseconds(20));
      std::vector<MessageTag> order = tags;
      std::shuffle(order.begin(), order.end(), std::mt19937(200 + me));
      for (size_t i = 0; i < order.size(); ++i) {
        Status s = t[me]->SendFloats(other, order[i], Payload(me, order[i], SizeOf(order[i])));
        if (!s.ok()) {
          ADD_FAILURE() << s.ToString();
          ++failures;
          return;
        }
        if (i % 40 == 39) std::this_thread::sleep_for(milliseconds(3));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (int me = 0; me < 2; ++me) EXPECT_TRUE(t[me]->Flush(kLong).ok());
  uint64_t expected = 0;
  for (const MessageTag& tag : tags) expected += kFrameHeaderBytes + 4 * SizeOf(tag);
  EXPECT_EQ(t[0]->bytes_sent(), expected);
  EXPECT_EQ(t[1]->bytes_received(), expected);
  EXPECT_EQ(t[1]->bytes_sent(), expected);
  EXPECT_EQ(t[0]->bytes_received(), expected);
  for (auto& x : t) x->Shutdown();
}

TEST(TcpTransportTest, FourRanksAllToAllFromSeveralThreads) {
  constexpr int kRanks = 4;
  auto mesh = MakeMesh(kRanks);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  auto& t = *mesh;
  std::vector<MessageTag> tags;
  for (int mb = 0; mb < 30; ++mb) tags.push_back(MessageTag{static_cast<uint32_t>(mb % 3), mb % 4, mb, 1});
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int me = 0; me < kRanks; ++me) {
    // Two sender threads per rank share the transport; each sends half of the tags to every
    // other rank, interleaving peers.
    for (int half = 0; half < 2; ++half) {
      threads.emplace_back([&, me, half] {
        std::vector<std::pair<int, MessageTag>> work;
        for (int peer = 0; peer < kRanks; ++peer) {
          if (peer == me) continue;
          for (size_t i = half; i < tags.size(); i += 2) work.emplace_back(peer, tags[i]);
        }
        std::shuffle(work.begin(), work.end(), std::mt19937(me * 10 + half));
        for (const auto& [peer, tag] : work) {
          if (!t[me]->SendFloats(peer, tag, Payload(me, tag, 1 + tag.mb * 100)).ok()) ++failures;
        }
      });
    }
    threads.emplace_back([&, me] {
      std::vector<std::pair<int, MessageTag>> work;
      for (int peer = 0; peer < kRanks; ++peer) {
        if (peer == me) continue;
        for (const MessageTag& tag : tags) work.emplace_back(peer, tag);
      }
      std::shuffle(work.begin(), work.end(), std::mt19937(1000 + me));
      for (const auto& [peer, tag] : work) {
        auto got = RecvAll(*t[me], peer, tag, kLong);
        if (!got.ok() || *got != Payload(peer, tag, 1 + tag.mb * 100)) {
          ADD_FAILURE() << "rank " << me << " from " << peer << " " << ToString(tag) << ": "
                        << got.status().ToString();
          ++failures;
          return;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (auto& x : t) {
    EXPECT_TRUE(x->Flush(kLong).ok());
    x->Shutdown();
  }
}

TEST(TcpTransportTest, LargePayloadsArriveIntactBothWays) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  auto& t = *mesh;
  constexpr size_t kFloats = size_t{16} << 20;  // 64 MiB
  // Every bit pattern class, NaNs included: compared as bytes.
  std::vector<float> big[2];
  for (int r = 0; r < 2; ++r) {
    big[r].resize(kFloats);
    uint32_t x = 12345 + r;
    for (size_t i = 0; i < kFloats; ++i) {
      x = x * 1664525u + 1013904223u;
      std::memcpy(&big[r][i], &x, 4);
    }
  }
  const MessageTag tag{0, 1, 2, 3};
  ASSERT_TRUE(t[0]->SendFloats(1, tag, big[0]).ok());
  ASSERT_TRUE(t[1]->SendFloats(0, tag, big[1]).ok());
  for (int r = 0; r < 2; ++r) {
    auto got = RecvAll(*t[r], 1 - r, tag, kLong);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), kFloats);
    EXPECT_EQ(std::memcmp(got->data(), big[1 - r].data(), kFloats * 4), 0);
  }
  for (auto& x : t) {
    EXPECT_TRUE(x->Flush(kLong).ok());
    EXPECT_EQ(x->bytes_sent(), kFrameHeaderBytes + kFloats * 4);
    x->Shutdown();
  }
}

TEST(TcpTransportTest, EmptyMessagesAndRepeatedTagsArriveFirstInFirstOut) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  auto& t = *mesh;
  const MessageTag tag{1, 0, 0, 0};
  ASSERT_TRUE(t[0]->SendFloats(1, tag, {}).ok());
  for (float v : {1.f, 2.f, 3.f}) ASSERT_TRUE(t[0]->SendFloats(1, tag, {v, v}).ok());
  auto got = RecvAll(*t[1], 0, tag, kLong);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  for (float v : {1.f, 2.f, 3.f}) {
    got = RecvAll(*t[1], 0, tag, kLong);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, (std::vector<float>{v, v}));
  }
}

// The slowlink fault's delay (TcpTransportOptions::send_delay): a message of a step at or past
// send_delay_from_step reaches the link send_delay after Send, which returns at once; earlier
// steps go at once; a message queued behind a delayed one waits for it (order per peer); Flush
// waits for the delayed ones.
TEST(TcpTransportTest, DelayedSendsArriveLateInOrderAndFlushWaitsForThem) {
  TcpTransportOptions o;
  o.send_delay = milliseconds(150);
  o.send_delay_from_step = 2;
  auto mesh = MakeMesh(2, o);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  auto& t = *mesh;
  const auto since = [](std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  const MessageTag step1{0, 0, 0, 1}, step2{0, 0, 0, 2}, behind{1, 0, 0, 1}, step3{0, 0, 1, 3};
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(t[0]->SendFloats(1, step1, {1.f}).ok());
  ASSERT_EQ(RecvAll(*t[1], 0, step1, kLong).value(), std::vector<float>{1.f});
  EXPECT_LT(since(t0), 100) << "a step before the fault's goes at once";
  t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(t[0]->SendFloats(1, step2, {2.f}).ok());
  ASSERT_TRUE(t[0]->SendFloats(1, behind, {3.f}).ok());
  EXPECT_LT(since(t0), 50) << "Send returns at once";
  ASSERT_EQ(RecvAll(*t[1], 0, behind, kLong).value(), std::vector<float>{3.f});
  EXPECT_GE(since(t0), 150) << "nothing overtakes a delayed message";
  ASSERT_EQ(RecvAll(*t[1], 0, step2, kLong).value(), std::vector<float>{2.f});
  t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(t[0]->SendFloats(1, step3, {4.f}).ok());
  ASSERT_TRUE(t[0]->Flush(kLong).ok());
  EXPECT_GE(since(t0), 150) << "Flush waits for the delayed send";
  ASSERT_EQ(RecvAll(*t[1], 0, step3, kLong).value(), std::vector<float>{4.f});
}

// ---------------------------------------------------------------------------------------------
// Errors the caller makes, and timeouts.

TEST(TcpTransportTest, UnknownPeerIsAnError) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  Status s = (*mesh)[0]->SendFloats(7, MessageTag{}, {1.f});
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("peer 7"));
  EXPECT_THAT(s.message(), HasSubstr("unknown peer (this transport's peers: 1)"));
  s = (*mesh)[0]->SendFloats(0, MessageTag{}, {1.f});  // itself is no peer either
  EXPECT_EQ(s.code(), Code::kNotFound);
  auto r = RecvAll(*(*mesh)[0], 7, MessageTag{}, milliseconds(1));
  EXPECT_EQ(r.status().code(), Code::kNotFound);
}

// Host memory that claims to be a device's: only to see Send refuse what it cannot send from.
class DeviceLabelledAllocator final : public kernels::Allocator {
 public:
  kernels::MemoryKind kind() const override { return kernels::MemoryKind::kCuda; }
  int device() const override { return 0; }
  Result<void*> Allocate(size_t bytes) override { return kernels::HostAllocator().Allocate(bytes); }
  void Deallocate(void* p, size_t bytes) override { kernels::HostAllocator().Deallocate(p, bytes); }
};

TEST(TcpTransportTest, TensorsArriveAsTheSpecTheReceiverNames) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  auto& t = *mesh;
  // Three bf16 values: 6 bytes, not a whole number of floats.
  auto bf16 = kernels::Tensor::Empty(kernels::HostAllocator(), {kernels::DType::kBF16, {3}});
  ASSERT_TRUE(bf16.ok());
  const uint16_t bits[3] = {0x3f80, 0xc000, 0x4049};  // 1, -2, 3.140625
  std::copy(bits, bits + 3, bf16->host_span<uint16_t>().begin());
  ASSERT_TRUE(t[0]->Send(1, MessageTag{0, 1, 0, 0}, *bf16).ok());
  auto got = t[1]->Recv(0, MessageTag{0, 1, 0, 0}, {kernels::DType::kBF16, {1, 3}}, kLong);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(std::vector<uint16_t>(got->host_span<uint16_t>().begin(), got->host_span<uint16_t>().end()),
            (std::vector<uint16_t>{0x3f80, 0xc000, 0x4049}));

  // A sender and a receiver that disagree on the size: an error naming both, never a misread.
  ASSERT_TRUE(t[0]->SendFloats(1, MessageTag{0, 2, 0, 0}, {1.f, 2.f}).ok());
  auto wrong = t[1]->Recv(0, MessageTag{0, 2, 0, 0}, {kernels::DType::kF32, {3}}, kLong);
  EXPECT_EQ(wrong.status().code(), Code::kInternal);
  EXPECT_THAT(wrong.status().message(), HasSubstr("expected f32[3] (12 bytes), got u8[8] (8 bytes)"));

  DeviceLabelledAllocator device;
  auto on_device = kernels::Tensor::Empty(device, {kernels::DType::kF32, {4}});
  ASSERT_TRUE(on_device.ok());
  Status s = t[0]->Send(1, MessageTag{}, *on_device);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("the TCP transport sends host tensors, this f32[4] is on cuda:0"));
}

TEST(TcpTransportTest, SendBeforeConnectNamesTheCause) {
  auto t = TcpTransport::Listen("127.0.0.1", 0);
  ASSERT_TRUE(t.ok());
  Status s = (*t)->SendFloats(1, MessageTag{}, {1.f});
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("Connect has not been called"));
}

TEST(TcpTransportTest, RecvTimesOutWithAClearError) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  auto& t = *mesh;
  ASSERT_TRUE(t[1]->SendFloats(0, MessageTag{0, 1, 2, 4}, {1.f}).ok());  // a near miss
  ASSERT_TRUE(t[1]->Flush(kLong).ok());
  Result<std::vector<float>> r = Status();
  const double ms = ElapsedMs([&] { r = RecvAll(*t[0], 1, MessageTag{0, 1, 2, 3}, milliseconds(100)); });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_THAT(r.status().message(),
              HasSubstr("Recv from peer 1 (" + t[1]->endpoint() +
                        ") tag {channel 0, stage 1, mb 2, step 3}: timed out after 100 ms"));
  EXPECT_THAT(r.status().message(), HasSubstr("1 message(s) with other tags from this peer are "
                                              "buffered, e.g. {channel 0, stage 1, mb 2, step 4}"));
  EXPECT_GE(ms, 95);
  EXPECT_LT(ms, 2000);
}

TEST(TcpTransportTest, SendRefusesPayloadsOverTheLimit) {
  TcpTransportOptions options;
  options.max_payload_bytes = 1024;
  auto mesh = MakeMesh(2, options);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  EXPECT_TRUE((*mesh)[0]->SendFloats(1, MessageTag{}, std::vector<float>(256)).ok());
  Status s = (*mesh)[0]->SendFloats(1, MessageTag{}, std::vector<float>(257));
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("1028 bytes exceeds max_payload_bytes 1024"));
}

// ---------------------------------------------------------------------------------------------
// Shutdown and broken links.

TEST(TcpTransportTest, PeerShutdownWakesTheWaiterPromptly) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  auto& t = *mesh;
  Result<std::vector<float>> r = Status();
  double waited_ms = 0;
  std::thread waiter([&] { waited_ms = ElapsedMs([&] { r = RecvAll(*t[0], 1, MessageTag{}, kLong); }); });
  std::this_thread::sleep_for(milliseconds(100));
  double shutdown_ms = ElapsedMs([&] { t[1]->Shutdown(); });
  waiter.join();
  EXPECT_LT(shutdown_ms, 1000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("link to peer 1"));
  EXPECT_THAT(r.status().message(), HasSubstr("broke"));
  EXPECT_LT(waited_ms, 100 + 2000);
  EXPECT_EQ(t[0]->BrokenPeers(), std::vector<int>{1});  // who to blame
  // The link stays broken: sends and receives fail at once.
  Status s = t[0]->SendFloats(1, MessageTag{}, {1.f});
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_LT(ElapsedMs([&] { r = RecvAll(*t[0], 1, MessageTag{}, kLong); }), 1000);
  EXPECT_FALSE(r.ok());
  t[0]->Shutdown();
}

TEST(TcpTransportTest, MessagesSentBeforeAPeerLeavesAreStillReceived) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  auto& t = *mesh;
  ASSERT_TRUE(t[1]->SendFloats(0, MessageTag{1, 0, 0, 0}, {4.f, 5.f}).ok());
  ASSERT_TRUE(t[1]->Flush(kLong).ok());
  t[1]->Shutdown();
  auto r = RecvAll(*t[0], 1, MessageTag{1, 0, 0, 0}, kLong);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (std::vector<float>{4.f, 5.f}));
}

TEST(TcpTransportTest, LocalShutdownWakesEveryWaiterAndIsIdempotent) {
  auto mesh = MakeMesh(3);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  auto& t = *mesh;
  std::vector<Status> results(4);
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.emplace_back([&, i] { results[i] = RecvAll(*t[0], 1 + i % 2, MessageTag{0, i, 0, 0}, kLong).status(); });
  }
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_LT(ElapsedMs([&] { t[0]->Shutdown(); }), 1000);
  for (auto& w : waiters) w.join();
  for (const Status& s : results) {
    EXPECT_EQ(s.code(), Code::kUnavailable);
    EXPECT_THAT(s.message(), HasSubstr("shut down"));
  }
  t[0]->Shutdown();
  EXPECT_TRUE(t[0]->BrokenPeers().empty());  // closed by us, not by a peer
  EXPECT_EQ(t[0]->SendFloats(1, MessageTag{}, {}).code(), Code::kUnavailable);
  EXPECT_EQ(t[0]->Flush(kLong).code(), Code::kUnavailable);
}

TEST(TcpTransportTest, FlushTimesOutAndShutdownIsPromptWhileAPeerDoesNotRead) {
  // Rank 1 is a transport; rank 0 a raw peer that completes the handshake and then reads
  // nothing, so big sends to it back up.
  auto a = TcpTransport::Listen("127.0.0.1", 0);
  ASSERT_TRUE(a.ok());
  Status connected;
  std::thread connector([&] { connected = (*a)->Connect(1, {{0, "127.0.0.1:9"}}, 7, kLong); });
  RawPeer raw((*a)->endpoint());
  raw.Write(EncodeHeader(HelloFrame(7, 0, 1)));
  auto answer = raw.ReadHeader(kLong);
  connector.join();
  ASSERT_TRUE(answer.has_value());
  ASSERT_EQ(answer->kind, static_cast<uint16_t>(FrameKind::kAccept));
  ASSERT_TRUE(connected.ok()) << connected.ToString();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE((*a)->SendFloats(0, MessageTag{0, 0, i, 0}, std::vector<float>(16 << 20)).ok());
  Status f;
  EXPECT_GE(ElapsedMs([&] { f = (*a)->Flush(milliseconds(200)); }), 190);
  EXPECT_EQ(f.code(), Code::kUnavailable);
  EXPECT_THAT(f.message(), HasSubstr("still unwritten after 200 ms (to peers 0)"));
  EXPECT_LT(ElapsedMs([&] { (*a)->Shutdown(); }), 1000);
}

// ---------------------------------------------------------------------------------------------
// Malformed, oversized and stale connections.

// Rank 1 (`a`) links to rank 2 (`c`, a transport) and rank 0 (`raw`, driven by the test).
struct MixedMesh {
  std::unique_ptr<TcpTransport> a, c;
  std::unique_ptr<RawPeer> raw;
};

MixedMesh MakeMixedMesh(const TcpTransportOptions& options = {}) {
  MixedMesh m;
  m.a = TcpTransport::Listen("127.0.0.1", 0, options).value();
  m.c = TcpTransport::Listen("127.0.0.1", 0, options).value();
  Status sa, sc;
  std::thread ta([&] {
    sa = m.a->Connect(1, {{0, "127.0.0.1:9"}, {2, m.c->endpoint()}}, options.session, kLong);
  });
  std::thread tc([&] { sc = m.c->Connect(2, {{1, m.a->endpoint()}}, options.session, kLong); });
  m.raw = std::make_unique<RawPeer>(m.a->endpoint());
  m.raw->Write(EncodeHeader(HelloFrame(options.session, 0, 1)));
  auto answer = m.raw->ReadHeader(kLong);
  ta.join();
  tc.join();
  EXPECT_TRUE(sa.ok()) << sa.ToString();
  EXPECT_TRUE(sc.ok()) << sc.ToString();
  EXPECT_TRUE(answer.has_value() && answer->kind == static_cast<uint16_t>(FrameKind::kAccept));
  return m;
}

void ExpectHealthy(TcpTransport& a, TcpTransport& c) {
  const MessageTag tag{0, 5, 5, 5};
  ASSERT_TRUE(a.SendFloats(2, tag, {1.f, 2.f}).ok());
  ASSERT_TRUE(c.SendFloats(1, tag, {3.f}).ok());
  auto x = RecvAll(c, 1, tag, kLong);
  auto y = RecvAll(a, 2, tag, kLong);
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(*x, (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(*y, (std::vector<float>{3.f}));
}

struct BadFrameCase {
  const char* name;
  FrameHeader header;
  size_t extra_bytes;  // payload bytes written after the header, then the raw peer waits
  const char* error;
};

FrameHeader DataHeader(uint64_t payload_bytes) {
  FrameHeader h;
  h.tag = MessageTag{0, 0, 0, 0};
  h.payload_bytes = payload_bytes;
  return h;
}

TEST(TcpTransportTest, MalformedFramesCloseOnlyTheirLink) {
  std::vector<BadFrameCase> cases;
  cases.push_back({"oversized", DataHeader(uint64_t{1} << 40), 0, "exceeds the limit of 1073741824 bytes"});
  FrameHeader magic = DataHeader(4);
  magic.magic = 0x12345678;
  cases.push_back({"bad magic", magic, 4, "bad magic 0x12345678"});
  FrameHeader version = DataHeader(0);
  version.version = kFrameVersion + 1;
  cases.push_back({"future version", version, 0, "unsupported frame version 3"});
  FrameHeader old = DataHeader(0);
  old.version = 1;  // f32-only payloads, before tensors of any dtype
  cases.push_back({"old version", old, 0, "unsupported frame version 1"});
  cases.push_back({"hello again", HelloFrame(0, 0, 1), 0, "a handshake frame (kind 2) after the handshake"});
  FrameHeader session = DataHeader(0);
  session.session = 99;
  cases.push_back({"other session", session, 0, "a frame of session 99 on a link of session 0"});
  cases.push_back({"truncated", DataHeader(4000), 100, "in the middle of a frame"});
  for (const BadFrameCase& bad : cases) {
    SCOPED_TRACE(bad.name);
    MixedMesh m = MakeMixedMesh();
    ASSERT_TRUE(m.raw);
    m.raw->Write(EncodeHeader(bad.header));
    std::vector<char> extra(bad.extra_bytes, 0);
    if (!extra.empty()) m.raw->Write(extra.data(), extra.size());
    if (std::string(bad.name) == "truncated") m.raw.reset();  // hang up mid-frame
    auto r = RecvAll(*m.a, 0, MessageTag{}, kLong);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kUnavailable);
    EXPECT_THAT(r.status().message(), HasSubstr("link to peer 0 (127.0.0.1:9) broke"));
    EXPECT_THAT(r.status().message(), HasSubstr(bad.error));
    if (m.raw) {
      EXPECT_TRUE(m.raw->ClosedWithin(kLong));
    }
    EXPECT_EQ(m.a->SendFloats(0, MessageTag{}, {1.f}).code(), Code::kUnavailable);
    ExpectHealthy(*m.a, *m.c);
  }
}

TEST(TcpTransportTest, OversizedFrameAgainstASmallLimit) {
  TcpTransportOptions options;
  options.max_payload_bytes = 1024;
  MixedMesh m = MakeMixedMesh(options);
  ASSERT_TRUE(m.raw);
  m.raw->Write(EncodeHeader(DataHeader(1028)));
  auto r = RecvAll(*m.a, 0, MessageTag{}, kLong);
  EXPECT_THAT(r.status().message(), HasSubstr("payload of 1028 bytes exceeds the limit of 1024"));
  ExpectHealthy(*m.a, *m.c);
}

TEST(TcpTransportTest, GarbageAndSilentConnectionsAreDroppedWithoutHarm) {
  TcpTransportOptions options;
  options.handshake_timeout = milliseconds(200);
  auto mesh = MakeMesh(2, options);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  auto& t = *mesh;
  RawPeer garbage(t[1]->endpoint());
  std::vector<char> junk(40, '\xff');
  garbage.Write(junk.data(), junk.size());
  EXPECT_TRUE(garbage.ClosedWithin(kLong));
  RawPeer silent(t[1]->endpoint());
  double ms = ElapsedMs([&] { EXPECT_TRUE(silent.ClosedWithin(kLong)); });
  EXPECT_LT(ms, 2000);
  RawPeer duplicate(t[1]->endpoint());  // claims rank 0, which is linked already
  duplicate.Write(EncodeHeader(HelloFrame(0, 0, 1)));
  auto answer = duplicate.ReadHeader(kLong);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->kind, static_cast<uint16_t>(FrameKind::kRefuse));
  EXPECT_EQ(answer->tag.channel, static_cast<uint32_t>(RefuseReason::kDuplicateRank));
  ASSERT_TRUE(t[0]->SendFloats(1, MessageTag{}, {9.f}).ok());
  auto r = RecvAll(*t[1], 0, MessageTag{}, kLong);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, std::vector<float>{9.f});
}

TEST(TcpTransportTest, WrongSessionIsRefused) {
  auto a = TcpTransport::Listen("127.0.0.1", 0);
  auto b = TcpTransport::Listen("127.0.0.1", 0);
  ASSERT_TRUE(a.ok() && b.ok());
  Status sa, sb;
  double a_ms = 0;
  std::thread ta([&] {
    a_ms = ElapsedMs([&] { sa = (*a)->Connect(0, {{1, (*b)->endpoint()}}, /*session=*/1, kLong); });
  });
  std::thread tb([&] { sb = (*b)->Connect(1, {{0, (*a)->endpoint()}}, /*session=*/2, milliseconds(500)); });
  ta.join();
  tb.join();
  EXPECT_EQ(sa.code(), Code::kUnavailable);
  EXPECT_THAT(sa.message(), HasSubstr("rank 1 at " + (*b)->endpoint() +
                                      " refused the connection: session mismatch (it runs "
                                      "session 2, we run session 1"));
  EXPECT_LT(a_ms, 5000);  // refused at once, not retried until the timeout
  EXPECT_EQ(sb.code(), Code::kUnavailable);
  EXPECT_THAT(sb.message(), HasSubstr("timed out after 500 ms waiting for rank 0"));
  EXPECT_THAT(sb.message(), HasSubstr("was refused: session mismatch (its session 1, ours 2)"));
}

// A worker handed the next job dials a peer whose port still serves that peer's previous job
// (an older session): it waits for the peer to finish and listen again, never failing for it.
TEST(TcpTransportTest, DiallerWaitsForAPeerStillClosingAnOlderSession) {
  TcpTransportOptions old_options;
  old_options.session = 3;
  auto old_b = TcpTransport::Listen("127.0.0.1", 0, old_options);
  ASSERT_TRUE(old_b.ok());
  const std::string b_endpoint = (*old_b)->endpoint();
  const int port = ParseHostPort(b_endpoint)->port;
  // The old job's rank 1 waits in Connect for a rank 0 that does not come (its job ended).
  Status old_status;
  std::thread old_thread([&] { old_status = (*old_b)->Connect(1, {{0, "127.0.0.1:9"}}, kLong); });
  auto a = TcpTransport::Listen("127.0.0.1", 0);
  ASSERT_TRUE(a.ok());
  Status sa;
  std::thread ta([&] { sa = (*a)->Connect(0, {{1, b_endpoint}}, /*session=*/4, kLong); });
  std::this_thread::sleep_for(milliseconds(400));  // several refusals by session 3 meanwhile
  (*old_b)->Shutdown();
  old_thread.join();
  EXPECT_EQ(old_status.code(), Code::kUnavailable);
  old_b->reset();
  TcpTransportOptions new_options;
  new_options.session = 4;
  auto b = TcpTransport::Listen("127.0.0.1", port, new_options);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  Status sb = (*b)->Connect(1, {{0, (*a)->endpoint()}}, kLong);
  ta.join();
  ASSERT_TRUE(sa.ok()) << sa.ToString();
  ASSERT_TRUE(sb.ok()) << sb.ToString();
  ASSERT_TRUE((*a)->SendFloats(1, MessageTag{}, {3.f}).ok());
  auto r = RecvAll(*(*b), 0, MessageTag{}, kLong);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, std::vector<float>{3.f});
}

// While the peer still serves the older session, a dialler that gives up says why it waited.
TEST(TcpTransportTest, ConnectTimeoutSaysThePeerWasClosingItsPreviousJob) {
  TcpTransportOptions old_options;
  old_options.session = 7;
  auto old_b = TcpTransport::Listen("127.0.0.1", 0, old_options);
  ASSERT_TRUE(old_b.ok());
  std::thread old_thread([&] { (void)(*old_b)->Connect(1, {{0, "127.0.0.1:9"}}, milliseconds(1500)); });
  auto a = TcpTransport::Listen("127.0.0.1", 0);
  ASSERT_TRUE(a.ok());
  const Status sa = (*a)->Connect(0, {{1, (*old_b)->endpoint()}}, /*session=*/8, milliseconds(600));
  old_thread.join();
  EXPECT_EQ(sa.code(), Code::kUnavailable);
  EXPECT_THAT(sa.message(), HasSubstr("timed out after 600 ms waiting for rank 1 at " + (*old_b)->endpoint() +
                                      " (we dial it; last attempt: rank 1 at " + (*old_b)->endpoint() +
                                      " was still closing session 7 (its previous job))"));
  EXPECT_EQ((*a)->UnconnectedPeers(), std::vector<int>{1});
  EXPECT_TRUE((*a)->BrokenPeers().empty());
}

TEST(TcpTransportTest, StaleConnectionIsRefusedWhileTheJobRuns) {
  TcpTransportOptions options;
  options.session = 5;
  auto mesh = MakeMesh(2, options);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  auto& t = *mesh;
  RawPeer stale(t[1]->endpoint());
  stale.Write(EncodeHeader(HelloFrame(4, 0, 1)));  // rank 0 of the previous job
  auto answer = stale.ReadHeader(kLong);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->kind, static_cast<uint16_t>(FrameKind::kRefuse));
  EXPECT_EQ(answer->tag.channel, static_cast<uint32_t>(RefuseReason::kSessionMismatch));
  EXPECT_EQ(answer->session, 5u);
  EXPECT_TRUE(stale.ClosedWithin(kLong));
  ASSERT_TRUE(t[0]->SendFloats(1, MessageTag{}, {1.f}).ok());
  EXPECT_TRUE(RecvAll(*t[1], 0, MessageTag{}, kLong).ok());
}

// ---------------------------------------------------------------------------------------------
// Connect.

TEST(TcpTransportTest, ConnectWaitsForAPeerThatStartsLateOnTheSamePort) {
  auto first = TcpTransport::Listen("127.0.0.1", 0);
  ASSERT_TRUE(first.ok());
  const std::string b_endpoint = (*first)->endpoint();
  const int port = ParseHostPort(b_endpoint)->port;
  first->reset();  // nothing listens there now: rank 0's dials are refused for a while
  auto a = TcpTransport::Listen("127.0.0.1", 0);
  ASSERT_TRUE(a.ok());
  Status sa;
  std::thread ta([&] { sa = (*a)->Connect(0, {{1, b_endpoint}}, kLong); });
  std::this_thread::sleep_for(milliseconds(300));
  auto b = TcpTransport::Listen("127.0.0.1", port);  // the same port again, as a daemon would
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  Status sb = (*b)->Connect(1, {{0, (*a)->endpoint()}, {1, b_endpoint}}, kLong);
  ta.join();
  ASSERT_TRUE(sa.ok()) << sa.ToString();
  ASSERT_TRUE(sb.ok()) << sb.ToString();
  ASSERT_TRUE((*a)->SendFloats(1, MessageTag{}, {2.f}).ok());
  EXPECT_TRUE(RecvAll(*(*b), 0, MessageTag{}, kLong).ok());
}

TEST(TcpTransportTest, ConnectTimeoutNamesEveryMissingPeer) {
  auto gone = TcpTransport::Listen("127.0.0.1", 0);
  ASSERT_TRUE(gone.ok());
  const std::string gone_endpoint = (*gone)->endpoint();
  gone->reset();
  auto t = TcpTransport::Listen("127.0.0.1", 0);
  ASSERT_TRUE(t.ok());
  Status s;
  const double ms = ElapsedMs([&] {
    s = (*t)->Connect(1, {{0, "127.0.0.1:9"}, {2, gone_endpoint}}, milliseconds(300));
  });
  EXPECT_GE(ms, 290);
  EXPECT_LT(ms, 3000);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("rank 1 timed out after 300 ms waiting for rank 0 at "
                                     "127.0.0.1:9 (it has not dialled in"));
  EXPECT_THAT(s.message(), HasSubstr("rank 2 at " + gone_endpoint +
                                     " (we dial it; last attempt: connection refused"));
}

TEST(TcpTransportTest, ConnectValidatesItsArguments) {
  auto t = TcpTransport::Listen("127.0.0.1", 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->Connect(-1, {}, kLong).code(), Code::kInvalidArgument);
  Status s = (*t)->Connect(0, {{1, "nohost"}}, kLong);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("peers[1]: endpoint 'nohost' is not HOST:PORT"));
  s = (*t)->Connect(0, {{1, "127.0.0.1:0"}}, kLong);
  EXPECT_THAT(s.message(), HasSubstr("has port 0"));
  EXPECT_TRUE((*t)->Connect(0, {{0, (*t)->endpoint()}}, kLong).ok());  // alone: nothing to do
  EXPECT_EQ((*t)->Connect(0, {}, kLong).code(), Code::kFailedPrecondition);
}

TEST(TcpTransportTest, ListenReportsBadAddresses) {
  auto t = TcpTransport::Listen("127.0.0.1", 70000);
  EXPECT_EQ(t.status().code(), Code::kInvalidArgument);
  auto a = TcpTransport::Listen("127.0.0.1", 0);
  ASSERT_TRUE(a.ok());
  EXPECT_THAT((*a)->endpoint(), HasSubstr("127.0.0.1:"));
  TcpTransportOptions bad;
  bad.io_threads = 0;
  EXPECT_EQ(TcpTransport::Listen("127.0.0.1", 0, bad).status().code(), Code::kInvalidArgument);
  auto taken = TcpTransport::Listen("127.0.0.1", ParseHostPort((*a)->endpoint())->port);
  EXPECT_EQ(taken.status().code(), Code::kUnavailable);
  EXPECT_THAT(taken.status().message(), HasSubstr("Listen on " + (*a)->endpoint() + ": "));
  auto foreign = TcpTransport::Listen("192.0.2.1", 0);  // TEST-NET: not an address of ours
  EXPECT_EQ(foreign.status().code(), Code::kUnavailable);
  EXPECT_THAT(foreign.status().message(), HasSubstr("Listen on 192.0.2.1:0: "));
}

}  // namespace
}  // namespace pipecoord::worker
