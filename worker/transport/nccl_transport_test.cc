// NcclTransport on real GPUs: two ranks in two threads of one process, rank r on GPU r (as two
// processes would be), each with its own compute stream and a poisoning allocator; received
// bytes are compared exactly with what was sent. Tests that need two GPUs skip with the reason
// on a one-GPU machine; everything skips without a GPU (kernels/device_test.cc's rule). The
// same-GPU refusal and Connect's argument checks run on one GPU.
#include "worker/transport/nccl_transport.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "worker/transport/gpu_test_util.h"
#include "worker/transport/local_rendezvous.h"

namespace pipecoord::worker {
namespace {

using gpu_testing::DeviceRank;
using gpu_testing::DeviceTensor;
using gpu_testing::FirstDifference;
using gpu_testing::Pattern;
using gpu_testing::ReadBack;
using kernels::DType;
using kernels::TensorSpec;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr milliseconds kLong(30000);  // never reached when things work
constexpr uint64_t kSession = 77;
constexpr const char* kNeedsTwo = "needs 2 GPUs: NCCL refuses two ranks on one device";

class NcclTransportTest : public gpu_testing::GpuTransportTest {
 protected:
  // Ranks 0 and 1 on `devices`, transports created (not connected).
  void MakeRanks(std::vector<int> devices) {
    for (int d : devices) {
      auto rank = DeviceRank::Make(d);
      ASSERT_TRUE(rank.ok()) << rank.status().ToString();
      auto t = NcclTransport::Create(d, (*rank)->stream.get(), *(*rank)->allocator);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      ranks_.push_back(std::move(*rank));
      nccl_.push_back(std::move(*t));
    }
  }

  // Connects both ranks, each on its own thread (as two processes would), and returns each
  // rank's result.
  std::vector<Status> ConnectBoth(milliseconds timeout = kLong) {
    std::vector<Status> results(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] { results[r] = nccl_[r]->Connect(r, {1 - r}, kSession, rendezvous_.Fn(), timeout); });
    }
    for (auto& t : threads) t.join();
    return results;
  }

  // Two ranks on GPUs 0 and 1, connected; skips on a one-GPU machine.
  void ConnectTwoGpus() {
    if (gpus() < 2) GTEST_SKIP() << kNeedsTwo << " (" << gpus() << " visible)";
    MakeRanks({0, 1});
    if (HasFatalFailure()) return;
    for (const Status& s : ConnectBoth()) ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void TearDown() override {
    nccl_.clear();  // before the streams and allocators they use
    ranks_.clear();
  }

  void ExpectReceived(int at, int from, const MessageTag& tag, const TensorSpec& spec,
                      const std::vector<uint8_t>& want) {
    auto got = nccl_[at]->Recv(from, tag, spec, kLong);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_FALSE(got->on_host());
    EXPECT_EQ(got->device(), ranks_[at]->device);
    EXPECT_EQ(got->spec(), spec);
    auto bytes = ReadBack(*ranks_[at], *got);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_EQ(FirstDifference(*bytes, want), -1)
        << "rank " << at << " " << ToString(tag) << " " << kernels::ToString(spec);
  }

  LocalRendezvous rendezvous_;
  std::vector<std::unique_ptr<DeviceRank>> ranks_;
  std::vector<std::unique_ptr<NcclTransport>> nccl_;
};

// ---- One GPU is enough ----

TEST_F(NcclTransportTest, TwoRanksOnOneGpuAreRefusedBeforeNcclSeesThem) {
  MakeRanks({0, 0});
  if (HasFatalFailure()) return;
  const std::vector<Status> results = ConnectBoth(milliseconds(10000));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].code(), Code::kFailedPrecondition) << results[r].ToString();
    EXPECT_THAT(results[r].message(), HasSubstr("ranks 0 and 1 are both on cuda:0"));
    EXPECT_THAT(results[r].message(), HasSubstr("staged transport"));
  }
  EXPECT_TRUE(nccl_[0]->BrokenPeers().empty());
}

TEST_F(NcclTransportTest, CreateAndConnectCheckTheirArguments) {
  auto rank = DeviceRank::Make(0);
  ASSERT_TRUE(rank.ok()) << rank.status().ToString();
  EXPECT_EQ(NcclTransport::Create(gpus(), (*rank)->stream.get(), *(*rank)->allocator).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(NcclTransport::Create(0, (*rank)->stream.get(), kernels::HostAllocator()).status().code(),
            Code::kInvalidArgument);
  auto t = NcclTransport::Create(0, (*rank)->stream.get(), *(*rank)->allocator);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->Connect(0, {0}, kSession, rendezvous_.Fn(), kLong).code(), Code::kInvalidArgument);
  EXPECT_EQ((*t)->Connect(0, {1, 1}, kSession, rendezvous_.Fn(), kLong).code(), Code::kInvalidArgument);
  // Not connected: Send and Recv say so.
  auto dev = DeviceTensor(**rank, {DType::kF32, {4}}, Pattern(1, 16));
  ASSERT_TRUE(dev.ok());
  EXPECT_EQ((*t)->Send(1, {}, *dev).code(), Code::kFailedPrecondition);
  EXPECT_EQ((*t)->Recv(1, {}, {DType::kF32, {4}}, milliseconds(10)).status().code(), Code::kFailedPrecondition);
}

TEST_F(NcclTransportTest, ConnectRefusesImplicitLaunchOrder) {
  MakeRanks({0});
  if (HasFatalFailure()) return;
  setenv("NCCL_LAUNCH_ORDER_IMPLICIT", "1", 1);
  Status st = nccl_[0]->Connect(0, {1}, kSession, rendezvous_.Fn(), kLong);
  unsetenv("NCCL_LAUNCH_ORDER_IMPLICIT");
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("NCCL_LAUNCH_ORDER_IMPLICIT"));
}

TEST_F(NcclTransportTest, APeerThatNeverComesFailsConnectWithTheRendezvousError) {
  LocalRendezvous impatient(milliseconds(300));
  MakeRanks({0});
  if (HasFatalFailure()) return;
  Status st = nccl_[0]->Connect(0, {1}, kSession, impatient.Fn(), kLong);
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("pair-0-1/rank-1"));
  EXPECT_EQ(nccl_[0]->Connect(0, {1}, kSession, impatient.Fn(), kLong).code(), Code::kFailedPrecondition);
}

// ---- Two GPUs ----

TEST_F(NcclTransportTest, ExchangesExactlyBothWays) {
  ConnectTwoGpus();
  if (IsSkipped() || HasFatalFailure()) return;
  const TensorSpec f32{DType::kF32, {4096}}, bf16{DType::kBF16, {2, 3, 5}}, empty{DType::kF32, {0}};
  auto a = DeviceTensor(*ranks_[0], f32, Pattern(1, f32.bytes()));
  auto b = DeviceTensor(*ranks_[1], bf16, Pattern(2, bf16.bytes()));
  auto e = DeviceTensor(*ranks_[0], empty, {});
  ASSERT_TRUE(a.ok() && b.ok() && e.ok());
  PIPECOORD_ASSERT_OK(nccl_[0]->Send(1, {0, 0, 1, 2}, *a));
  PIPECOORD_ASSERT_OK(nccl_[0]->Send(1, {0, 0, 2, 2}, *e));
  PIPECOORD_ASSERT_OK(nccl_[1]->Send(0, {1, 1, 1, 2}, *b));
  ExpectReceived(1, 0, {0, 0, 1, 2}, f32, Pattern(1, f32.bytes()));
  ExpectReceived(1, 0, {0, 0, 2, 2}, empty, {});
  ExpectReceived(0, 1, {1, 1, 1, 2}, bf16, Pattern(2, bf16.bytes()));
  PIPECOORD_ASSERT_OK(nccl_[0]->Flush(kLong));
  PIPECOORD_ASSERT_OK(nccl_[1]->Flush(kLong));
  // 64-byte headers (one hello each way) plus the payloads.
  EXPECT_EQ(nccl_[0]->bytes_sent(), 64u * 3 + f32.bytes());
  EXPECT_EQ(nccl_[1]->bytes_received(), 64u * 3 + f32.bytes());
  EXPECT_EQ(nccl_[1]->bytes_sent(), 64u * 2 + bf16.bytes());
  EXPECT_EQ(nccl_[0]->bytes_received(), 64u * 2 + bf16.bytes());
  EXPECT_TRUE(nccl_[0]->BrokenPeers().empty());
  EXPECT_TRUE(nccl_[1]->BrokenPeers().empty());
}

// The schedule that deadlocks a single communicator per pair: both ranks send everything
// (large payloads among them, beyond NCCL's buffers) before either receives, then receive in the
// reverse order of sending. Every wait is bounded, so a deadlock would fail, not hang.
TEST_F(NcclTransportTest, CrossingSendsDoNotDeadlock) {
  ConnectTwoGpus();
  if (IsSkipped() || HasFatalFailure()) return;
  const std::vector<TensorSpec> specs = {
      {DType::kF32, {0}}, {DType::kBF16, {512}}, {DType::kF32, {2 << 20}}, {DType::kBF16, {4096, 4096}}};
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r, round] {
        const int peer = 1 - r;
        for (size_t i = 0; i < specs.size(); ++i) {
          auto t = DeviceTensor(*ranks_[r], specs[i], Pattern(1000 * round + 100 * r + i, specs[i].bytes()));
          ASSERT_TRUE(t.ok()) << t.status().ToString();
          PIPECOORD_ASSERT_OK(nccl_[r]->Send(peer, {0, r, static_cast<int>(i), round}, *t));
        }
        for (size_t k = specs.size(); k-- > 0;) {
          ExpectReceived(r, peer, {0, peer, static_cast<int>(k), round}, specs[k],
                         Pattern(1000 * round + 100 * peer + k, specs[k].bytes()));
        }
        PIPECOORD_ASSERT_OK(nccl_[r]->Flush(kLong));
      });
    }
    for (auto& t : threads) t.join();
  }
}

TEST_F(NcclTransportTest, ReceivesInAnyTagOrderAndFirstInFirstOutPerTag) {
  ConnectTwoGpus();
  if (IsSkipped() || HasFatalFailure()) return;
  const TensorSpec spec{DType::kF32, {300}};
  const MessageTag a{0, 0, 1, 0}, b{1, 0, 1, 0};
  for (uint32_t seed : {10u, 20u, 30u}) {
    auto t = DeviceTensor(*ranks_[0], spec, Pattern(seed, spec.bytes()));
    ASSERT_TRUE(t.ok());
    PIPECOORD_ASSERT_OK(nccl_[0]->Send(1, seed == 20 ? b : a, *t));
  }
  ExpectReceived(1, 0, b, spec, Pattern(20, spec.bytes()));
  ExpectReceived(1, 0, a, spec, Pattern(10, spec.bytes()));
  ExpectReceived(1, 0, a, spec, Pattern(30, spec.bytes()));
}

// Send waits for the producer on the GPU, not on the host: the bytes are written on the compute
// stream 300 ms after Send returned.
TEST_F(NcclTransportTest, SendWaitsForTheProducersStream) {
  ConnectTwoGpus();
  if (IsSkipped() || HasFatalFailure()) return;
  const TensorSpec spec{DType::kF32, {1 << 18}};
  const auto want = Pattern(9, spec.bytes());
  auto late = gpu_testing::ProduceLater(*ranks_[0], spec, want, 300);
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  const auto t0 = std::chrono::steady_clock::now();
  PIPECOORD_ASSERT_OK(nccl_[0]->Send(1, {}, late->tensor));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(250)) << "Send waited for the producer on the host";
  ExpectReceived(1, 0, {}, spec, want);
  PIPECOORD_ASSERT_OK(ranks_[0]->Sync());
}

TEST_F(NcclTransportTest, RecvTimeoutNamesPeerAndTagAndKeepsTheLink) {
  ConnectTwoGpus();
  if (IsSkipped() || HasFatalFailure()) return;
  const TensorSpec spec{DType::kF32, {64}};
  const MessageTag tag{0, 3, 4, 5};
  auto early = nccl_[1]->Recv(0, tag, spec, milliseconds(100));
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.status().code(), Code::kUnavailable);
  EXPECT_THAT(early.status().message(), HasSubstr("peer 0"));
  EXPECT_THAT(early.status().message(), HasSubstr("{channel 0, stage 3, mb 4, step 5}"));
  EXPECT_THAT(early.status().message(), HasSubstr("timed out"));
  auto t = DeviceTensor(*ranks_[0], spec, Pattern(4, spec.bytes()));
  ASSERT_TRUE(t.ok());
  PIPECOORD_ASSERT_OK(nccl_[0]->Send(1, tag, *t));
  ExpectReceived(1, 0, tag, spec, Pattern(4, spec.bytes()));
  EXPECT_TRUE(nccl_[1]->BrokenPeers().empty());
}

TEST_F(NcclTransportTest, SizeMismatchIsInternalNamingBothAndTheLinkGoesOn) {
  ConnectTwoGpus();
  if (IsSkipped() || HasFatalFailure()) return;
  const TensorSpec sent{DType::kF32, {10}}, expected{DType::kF32, {11}};
  auto t = DeviceTensor(*ranks_[0], sent, Pattern(6, sent.bytes()));
  ASSERT_TRUE(t.ok());
  PIPECOORD_ASSERT_OK(nccl_[0]->Send(1, {}, *t));
  PIPECOORD_ASSERT_OK(nccl_[0]->Send(1, {}, *t));
  auto wrong = nccl_[1]->Recv(0, {}, expected, kLong);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), Code::kInternal);
  EXPECT_THAT(wrong.status().message(), HasSubstr("f32[11]"));
  EXPECT_THAT(wrong.status().message(), HasSubstr("f32[10]"));
  ExpectReceived(1, 0, {}, sent, Pattern(6, sent.bytes()));
}

TEST_F(NcclTransportTest, RefusesHostTensorsUnknownPeersAndTheReservedChannel) {
  ConnectTwoGpus();
  if (IsSkipped() || HasFatalFailure()) return;
  Status host = nccl_[0]->SendFloats(1, {}, {1, 2});
  EXPECT_EQ(host.code(), Code::kFailedPrecondition) << host.ToString();
  EXPECT_THAT(host.message(), HasSubstr("host memory"));
  auto t = DeviceTensor(*ranks_[0], {DType::kF32, {2}}, Pattern(1, 8));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(nccl_[0]->Send(5, {}, *t).code(), Code::kNotFound);
  EXPECT_EQ(nccl_[0]->Recv(5, {}, {DType::kF32, {2}}, milliseconds(10)).status().code(), Code::kNotFound);
  EXPECT_EQ(nccl_[0]->Send(1, {0xFFFFFFFFu, 0, 0, 0}, *t).code(), Code::kInvalidArgument);
  // A tensor of the other rank's GPU.
  auto other = DeviceTensor(*ranks_[1], {DType::kF32, {2}}, Pattern(1, 8));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(nccl_[0]->Send(1, {}, *other).code(), Code::kFailedPrecondition);
}

// An NCCL send completes once the peer's Recv took it off the link: Flush waits for that.
TEST_F(NcclTransportTest, FlushWaitsUntilThePeerReceives) {
  ConnectTwoGpus();
  if (IsSkipped() || HasFatalFailure()) return;
  const TensorSpec spec{DType::kF32, {16 << 20}};  // 64 MiB, far beyond NCCL's staging buffers
  auto t = DeviceTensor(*ranks_[0], spec, Pattern(8, spec.bytes()));
  ASSERT_TRUE(t.ok());
  PIPECOORD_ASSERT_OK(nccl_[0]->Send(1, {}, *t));
  Status early = nccl_[0]->Flush(milliseconds(200));
  EXPECT_EQ(early.code(), Code::kUnavailable) << early.ToString();
  EXPECT_THAT(early.message(), HasSubstr("peers 1"));
  ExpectReceived(1, 0, {}, spec, Pattern(8, spec.bytes()));
  PIPECOORD_ASSERT_OK(nccl_[0]->Flush(kLong));
}

TEST_F(NcclTransportTest, ShutdownWakesAWaitingRecvAndLaterCallsFail) {
  ConnectTwoGpus();
  if (IsSkipped() || HasFatalFailure()) return;
  Status waited;
  std::thread waiter([&] { waited = nccl_[1]->Recv(0, {}, {DType::kF32, {4}}, kLong).status(); });
  std::this_thread::sleep_for(milliseconds(100));
  const auto t0 = std::chrono::steady_clock::now();
  nccl_[1]->Shutdown();
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(5000));
  EXPECT_EQ(waited.code(), Code::kUnavailable) << waited.ToString();
  auto t = DeviceTensor(*ranks_[1], {DType::kF32, {4}}, Pattern(1, 16));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(nccl_[1]->Send(0, {}, *t).code(), Code::kUnavailable);
  EXPECT_EQ(nccl_[1]->Flush(kLong).code(), Code::kUnavailable);
  EXPECT_TRUE(nccl_[1]->BrokenPeers().empty());  // shut down, not broken
  nccl_[1]->Shutdown();                          // idempotent
  nccl_[0]->Shutdown();
}

}  // namespace
}  // namespace pipecoord::worker
