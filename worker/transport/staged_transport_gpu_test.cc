// StagedTransport with device tensors: two ranks of one process on GPU 0 (as two processes
// sharing a GPU would be), each with its own compute stream, over a real TCP mesh. Received
// tensors come from a poisoning allocator and are compared byte for byte with what was sent.
// Skips without a GPU (kernels/device_test.cc's rule).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "worker/transport/gpu_test_util.h"
#include "worker/transport/staged_transport.h"
#include "worker/transport/test_util.h"

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

constexpr milliseconds kLong(30000);  // never reached when things work

class StagedTransportGpuTest : public gpu_testing::GpuTransportTest {
 protected:
  void SetUp() override {
    GpuTransportTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto mesh = testing::MakeMesh(2);
    ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
    tcp_ = std::move(*mesh);
    for (int r = 0; r < 2; ++r) {
      auto rank = DeviceRank::Make(0);
      ASSERT_TRUE(rank.ok()) << rank.status().ToString();
      ranks_.push_back(std::move(*rank));
      staged_.push_back(std::make_unique<StagedTransport>(
          *tcp_[r], StagedTransportOptions{ranks_[r]->allocator.get(), ranks_[r]->stream.get()}));
    }
  }

  void TearDown() override {
    staged_.clear();  // before the streams and allocators they use
    tcp_.clear();
    ranks_.clear();
  }

  // Receives `tag` from `from` at rank `at` and expects exactly `want`.
  void ExpectReceived(int at, int from, const MessageTag& tag, const TensorSpec& spec,
                      const std::vector<uint8_t>& want) {
    auto got = staged_[at]->Recv(from, tag, spec, kLong);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_FALSE(got->on_host());
    EXPECT_EQ(got->device(), 0);
    EXPECT_EQ(got->spec(), spec);
    auto bytes = ReadBack(*ranks_[at], *got);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_EQ(FirstDifference(*bytes, want), -1) << ToString(tag) << " " << kernels::ToString(spec);
  }

  std::vector<std::unique_ptr<TcpTransport>> tcp_;
  std::vector<std::unique_ptr<DeviceRank>> ranks_;
  std::vector<std::unique_ptr<StagedTransport>> staged_;
};

TEST_F(StagedTransportGpuTest, DeviceTensorsArriveExactlyAsDeviceTensors) {
  const TensorSpec f32{DType::kF32, {1000}}, bf16{DType::kBF16, {3, 7}}, empty{DType::kF32, {0}};
  const auto a = Pattern(1, f32.bytes()), b = Pattern(2, bf16.bytes());
  auto ta = DeviceTensor(*ranks_[0], f32, a);
  auto tb = DeviceTensor(*ranks_[1], bf16, b);
  auto te = DeviceTensor(*ranks_[0], empty, {});
  ASSERT_TRUE(ta.ok() && tb.ok() && te.ok());
  PIPECOORD_ASSERT_OK(staged_[0]->Send(1, {0, 1, 2, 3}, *ta));
  PIPECOORD_ASSERT_OK(staged_[0]->Send(1, {0, 1, 3, 3}, *te));
  PIPECOORD_ASSERT_OK(staged_[1]->Send(0, {1, 0, 2, 3}, *tb));
  ExpectReceived(1, 0, {0, 1, 2, 3}, f32, a);
  ExpectReceived(1, 0, {0, 1, 3, 3}, empty, {});
  ExpectReceived(0, 1, {1, 0, 2, 3}, bf16, b);
  PIPECOORD_ASSERT_OK(staged_[0]->Flush(kLong));
  PIPECOORD_ASSERT_OK(staged_[1]->Flush(kLong));
}

// Both ranks send (a large tensor among them) before either receives, and receive in the
// reverse order of sending.
TEST_F(StagedTransportGpuTest, CrossingSendsAndAnyReceiveOrder) {
  const std::vector<TensorSpec> specs = {{DType::kF32, {256}}, {DType::kBF16, {4096, 4096}}, {DType::kI32, {3}}};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      const int peer = 1 - r;
      std::vector<kernels::Tensor> sent;
      for (size_t i = 0; i < specs.size(); ++i) {
        auto t = DeviceTensor(*ranks_[r], specs[i], Pattern(100 * r + static_cast<uint32_t>(i), specs[i].bytes()));
        ASSERT_TRUE(t.ok()) << t.status().ToString();
        PIPECOORD_ASSERT_OK(staged_[r]->Send(peer, {0, r, static_cast<int>(i), 0}, *t));
      }
      for (size_t k = specs.size(); k-- > 0;) {
        ExpectReceived(r, peer, {0, peer, static_cast<int>(k), 0}, specs[k],
                       Pattern(100 * peer + static_cast<uint32_t>(k), specs[k].bytes()));
      }
      PIPECOORD_ASSERT_OK(staged_[r]->Flush(kLong));
    });
  }
  for (auto& t : threads) t.join();
}

// The copy to the host waits for the producer: the tensor's bytes are written on the compute
// stream 300 ms after Send returned.
TEST_F(StagedTransportGpuTest, SendWaitsForTheProducersStream) {
  const TensorSpec spec{DType::kF32, {1 << 16}};
  const auto want = Pattern(7, spec.bytes());
  auto late = gpu_testing::ProduceLater(*ranks_[0], spec, want, 300);
  ASSERT_TRUE(late.ok()) << late.status().ToString();
  PIPECOORD_ASSERT_OK(staged_[0]->Send(1, {}, late->tensor));
  ExpectReceived(1, 0, {}, spec, want);
  PIPECOORD_ASSERT_OK(ranks_[0]->Sync());  // the pinned source may go now
}

// A host tensor sent while a device tensor to the same peer is still being staged waits behind
// it: same tag, first in first out.
TEST_F(StagedTransportGpuTest, HostSendsWaitBehindStagedOnesToThePeer) {
  const TensorSpec spec{DType::kF32, {1024}};
  const auto first = Pattern(11, spec.bytes()), second = Pattern(12, spec.bytes());
  auto late = gpu_testing::ProduceLater(*ranks_[0], spec, first, 200);
  ASSERT_TRUE(late.ok());
  PIPECOORD_ASSERT_OK(staged_[0]->Send(1, {}, late->tensor));
  auto host = kernels::Tensor::Empty(kernels::HostAllocator(), spec);
  ASSERT_TRUE(host.ok());
  std::memcpy(host->data(), second.data(), second.size());
  PIPECOORD_ASSERT_OK(staged_[0]->Send(1, {}, *host));
  ExpectReceived(1, 0, {}, spec, first);
  ExpectReceived(1, 0, {}, spec, second);
  PIPECOORD_ASSERT_OK(ranks_[0]->Sync());
}

TEST_F(StagedTransportGpuTest, SizeMismatchIsInternalAndTheLinkGoesOn) {
  const TensorSpec sent{DType::kF32, {10}}, expected{DType::kF32, {11}};
  auto t = DeviceTensor(*ranks_[0], sent, Pattern(3, sent.bytes()));
  ASSERT_TRUE(t.ok());
  PIPECOORD_ASSERT_OK(staged_[0]->Send(1, {}, *t));
  auto wrong = staged_[1]->Recv(0, {}, expected, kLong);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), Code::kInternal) << wrong.status().ToString();
  PIPECOORD_ASSERT_OK(staged_[0]->Send(1, {}, *t));
  ExpectReceived(1, 0, {}, sent, Pattern(3, sent.bytes()));
}

TEST_F(StagedTransportGpuTest, ShutdownWithStagedSendsInFlightReturnsPromptly) {
  const TensorSpec spec{DType::kF32, {1 << 20}};
  auto late = gpu_testing::ProduceLater(*ranks_[0], spec, Pattern(5, spec.bytes()), 100);
  ASSERT_TRUE(late.ok());
  PIPECOORD_ASSERT_OK(staged_[0]->Send(1, {}, late->tensor));
  staged_[0]->Shutdown();
  EXPECT_EQ(staged_[0]->Send(1, {}, late->tensor).code(), Code::kUnavailable);
  staged_[0].reset();  // waits for the queued copy, then frees it
  PIPECOORD_ASSERT_OK(ranks_[0]->Sync());
}

}  // namespace
}  // namespace pipecoord::worker
