// StagedTransport without a GPU: host tensors pass through to a real TCP mesh, and everything
// the Transport contract promises (order, errors, counters, shutdown) is the inner transport's.
#include "worker/transport/staged_transport.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kernels/tensor.h"
#include "worker/parallel/collectives.h"
#include "worker/transport/test_util.h"

namespace pipecoord::worker {
namespace {

using std::chrono::milliseconds;
using testing::MakeMesh;

constexpr milliseconds kLong(10000);  // never reached when things work

// Host-only staged transports over a TCP mesh of n ranks.
struct StagedMesh {
  std::vector<std::unique_ptr<TcpTransport>> tcp;
  std::vector<std::unique_ptr<StagedTransport>> staged;
};

StagedMesh MakeStagedMesh(int n) {
  StagedMesh m;
  auto mesh = MakeMesh(n);
  EXPECT_TRUE(mesh.ok()) << mesh.status().ToString();
  if (!mesh.ok()) return m;
  m.tcp = std::move(*mesh);
  for (auto& t : m.tcp) m.staged.push_back(std::make_unique<StagedTransport>(*t, StagedTransportOptions{}));
  return m;
}

// Host memory that claims to be on cuda:0: a device tensor for a transport that has no GPU to
// touch (the refusal must happen before any CUDA call).
class FakeDeviceAllocator final : public kernels::Allocator {
 public:
  kernels::MemoryKind kind() const override { return kernels::MemoryKind::kCuda; }
  int device() const override { return 0; }
  Result<void*> Allocate(size_t bytes) override { return kernels::HostAllocator().Allocate(bytes); }
  void Deallocate(void* ptr, size_t bytes) override { kernels::HostAllocator().Deallocate(ptr, bytes); }
};

TEST(StagedTransportTest, HostTensorsOfEveryDTypePassThroughExactly) {
  StagedMesh m = MakeStagedMesh(2);
  ASSERT_EQ(m.staged.size(), 2u);
  const MessageTag tag{kActivationChannel, 1, 2, 3};
  ASSERT_TRUE(m.staged[0]->SendFloats(1, tag, {1.5f, -2.25f, 3e-38f, 65504.f}).ok());
  auto floats = m.staged[1]->RecvFloats(0, tag, 4, kLong);
  ASSERT_TRUE(floats.ok()) << floats.status().ToString();
  EXPECT_EQ(*floats, (std::vector<float>{1.5f, -2.25f, 3e-38f, 65504.f}));

  // bf16 bits and i32 the other way.
  auto bf16 = kernels::Tensor::Empty(kernels::HostAllocator(), {kernels::DType::kBF16, {2, 3}});
  ASSERT_TRUE(bf16.ok());
  const std::vector<uint16_t> bits = {0x3F80, 0xBF80, 0x7F80, 0x0001, 0x8000, 0x4049};
  std::memcpy(bf16->data(), bits.data(), bits.size() * 2);
  const MessageTag back{kGradientChannel, 0, 2, 3};
  ASSERT_TRUE(m.staged[1]->Send(0, back, *bf16).ok());
  ASSERT_TRUE(m.staged[1]->Send(0, back, kernels::Tensor::FromVector(std::vector<int32_t>{7, -8, 1 << 30})).ok());
  auto got_bf16 = m.staged[0]->Recv(1, back, {kernels::DType::kBF16, {2, 3}}, kLong);
  ASSERT_TRUE(got_bf16.ok()) << got_bf16.status().ToString();
  EXPECT_TRUE(got_bf16->on_host());
  auto span = got_bf16->host_span<uint16_t>();
  EXPECT_EQ(std::vector<uint16_t>(span.begin(), span.end()), bits);
  auto got_i32 = m.staged[0]->Recv(1, back, {kernels::DType::kI32, {3}}, kLong);
  ASSERT_TRUE(got_i32.ok()) << got_i32.status().ToString();
  auto ints = got_i32->host_span<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(ints.begin(), ints.end()), (std::vector<int32_t>{7, -8, 1 << 30}));
}

TEST(StagedTransportTest, ReceivesInAnyTagOrderAndFirstInFirstOutPerTag) {
  StagedMesh m = MakeStagedMesh(2);
  ASSERT_EQ(m.staged.size(), 2u);
  const MessageTag a{0, 0, 1, 0}, b{0, 0, 2, 0};
  ASSERT_TRUE(m.staged[0]->SendFloats(1, a, {1}).ok());
  ASSERT_TRUE(m.staged[0]->SendFloats(1, b, {2}).ok());
  ASSERT_TRUE(m.staged[0]->SendFloats(1, a, {3}).ok());
  auto rb = m.staged[1]->RecvFloats(0, b, 1, kLong);
  auto ra1 = m.staged[1]->RecvFloats(0, a, 1, kLong);
  auto ra2 = m.staged[1]->RecvFloats(0, a, 1, kLong);
  ASSERT_TRUE(rb.ok() && ra1.ok() && ra2.ok());
  EXPECT_EQ(*rb, std::vector<float>{2});
  EXPECT_EQ(*ra1, std::vector<float>{1});
  EXPECT_EQ(*ra2, std::vector<float>{3});
}

TEST(StagedTransportTest, InnerErrorsPassThroughWithPeerAndTag) {
  StagedMesh m = MakeStagedMesh(2);
  ASSERT_EQ(m.staged.size(), 2u);
  const MessageTag tag{0, 4, 5, 6};
  Status unknown = m.staged[0]->SendFloats(7, tag, {1});
  EXPECT_EQ(unknown.code(), Code::kNotFound) << unknown.ToString();

  ASSERT_TRUE(m.staged[0]->SendFloats(1, tag, {1, 2, 3}).ok());
  auto wrong = m.staged[1]->RecvFloats(0, tag, 4, kLong);  // the ranks disagree on the size
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), Code::kInternal) << wrong.status().ToString();

  auto late = m.staged[1]->RecvFloats(0, {0, 9, 9, 9}, 1, milliseconds(50));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), Code::kUnavailable);
  EXPECT_NE(late.status().message().find("peer 0"), std::string::npos) << late.status().message();
  EXPECT_NE(late.status().message().find("{channel 0, stage 9, mb 9, step 9}"), std::string::npos);
}

TEST(StagedTransportTest, DeviceTensorsNeedADevice) {
  StagedMesh m = MakeStagedMesh(2);
  ASSERT_EQ(m.staged.size(), 2u);
  FakeDeviceAllocator fake;
  auto t = kernels::Tensor::Empty(fake, {kernels::DType::kF32, {4}});
  ASSERT_TRUE(t.ok());
  Status st = m.staged[0]->Send(1, {}, *t);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("without a device"), std::string::npos) << st.message();
  // Nothing reached the peer, and the transport still works.
  ASSERT_TRUE(m.staged[0]->SendFloats(1, {}, {5}).ok());
  auto r = m.staged[1]->RecvFloats(0, {}, 1, kLong);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, std::vector<float>{5});
}

TEST(StagedTransportTest, CountersFlushAndBrokenPeersAreTheInnerTransports) {
  StagedMesh m = MakeStagedMesh(2);
  ASSERT_EQ(m.staged.size(), 2u);
  ASSERT_TRUE(m.staged[0]->SendFloats(1, {}, std::vector<float>(1000, 1.f)).ok());
  EXPECT_TRUE(m.staged[0]->Flush(kLong).ok());
  ASSERT_TRUE(m.staged[1]->RecvFloats(0, {}, 1000, kLong).ok());
  EXPECT_GE(m.staged[0]->bytes_sent(), 4000u);
  EXPECT_EQ(m.staged[0]->bytes_sent(), m.tcp[0]->bytes_sent());
  EXPECT_EQ(m.staged[1]->bytes_received(), m.tcp[1]->bytes_received());
  EXPECT_TRUE(m.staged[0]->BrokenPeers().empty());

  m.staged[1]->Shutdown();  // closes rank 1's links: rank 0 sees its peer go
  const auto give_up = std::chrono::steady_clock::now() + kLong;
  while (m.staged[0]->BrokenPeers().empty() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(m.staged[0]->BrokenPeers(), std::vector<int>{1});
  EXPECT_EQ(m.staged[0]->BrokenPeers(), m.tcp[0]->BrokenPeers());
}

TEST(StagedTransportTest, ShutdownShutsTheInnerTransportDown) {
  StagedMesh m = MakeStagedMesh(2);
  ASSERT_EQ(m.staged.size(), 2u);
  std::thread waiter([&] {
    auto r = m.staged[0]->RecvFloats(1, {}, 1, kLong);
    EXPECT_EQ(r.status().code(), Code::kUnavailable);
  });
  std::this_thread::sleep_for(milliseconds(20));
  const auto t0 = std::chrono::steady_clock::now();
  m.staged[0]->Shutdown();
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(2000));  // the waiter woke at once
  EXPECT_EQ(m.staged[0]->SendFloats(1, {}, {1}).code(), Code::kUnavailable);
  EXPECT_EQ(m.tcp[0]->SendFloats(1, {}, {1}).code(), Code::kUnavailable);  // the inner one too
  EXPECT_EQ(m.staged[0]->Flush(kLong).code(), Code::kUnavailable);
  m.staged[0]->Shutdown();  // idempotent
}

// A decorator is a Transport: the ring all-reduce runs over it unchanged.
TEST(StagedTransportTest, AllReduceRunsOverStagedTransports) {
  constexpr int kRanks = 3;
  StagedMesh m = MakeStagedMesh(kRanks);
  ASSERT_EQ(m.staged.size(), static_cast<size_t>(kRanks));
  std::vector<std::vector<float>> data(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < 10; ++i) data[r].push_back(static_cast<float>(r * 100 + i));
  }
  std::vector<Status> results(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      parallel::HostFloats buffer(data[r]);
      results[r] = parallel::AllReduceSum(*m.staged[r], parallel::Group{{0, 1, 2}, r}, 1, buffer, {kLong});
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r].ToString();
    for (int i = 0; i < 10; ++i) EXPECT_EQ(data[r][i], static_cast<float>(300 + 3 * i)) << r << " " << i;
  }
}

}  // namespace
}  // namespace pipecoord::worker
