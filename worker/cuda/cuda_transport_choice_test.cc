// CudaBackend::BoundaryTransport: the ranks of a job publish their GPU through the rendezvous and
// all take the same path: staged through the host when two ranks that exchange tensors share a
// GPU, NCCL when each is on its own, staged without a rendezvous. Two ranks in threads, as two
// workers would, each its own backend and CudaDevice, over a real TCP mesh.
//
// Built twice. On a GPU (gpu-tagged): the backends' real GPU identities; the transport chosen
// carries a device tensor between them byte for byte (NCCL needs two GPUs: that case skips on a
// one-GPU machine). On the host double (_host, runs everywhere): the same exchange and choice
// over its stand-in identities (one GPU per device index); it builds no transport.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#ifndef PIPECOORD_CUDA_HOST_EMULATION
#include "kernels/device.h"
#endif
#include "worker/cuda/cuda_backend.h"
#include "worker/cuda/cuda_test_util.h"
#include "worker/transport/local_rendezvous.h"
#include "worker/transport/test_util.h"

namespace pipecoord::worker::cuda {
namespace {

using std::chrono::milliseconds;

struct RankEnd {
  std::unique_ptr<CudaBackend> backend;  // declared first: its pool outlives the transport
  std::unique_ptr<Transport> transport;
  Status status;
  std::string how;
};

class CudaTransportChoiceTest : public CudaModelTestBase {
 protected:
  // Rank r of a pp 2 job holds stage r of TestConfig() on CUDA device devices[r]; both ask for
  // their boundary transport at once, in threads, over `mesh`.
  std::vector<RankEnd> Choose(const std::vector<int>& devices, bool with_rendezvous = true) {
    auto mesh = testing::MakeMesh(2);
    EXPECT_TRUE(mesh.ok()) << mesh.status().ToString();
    if (!mesh.ok()) return {};
    mesh_ = std::move(mesh).value();
    std::vector<RankEnd> ends(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      const model::StageShard shard = r == 0 ? model::StageShard{0, 0, 1, true, false} : model::StageShard{1, 1, 1, false, true};
      assignments_[r] = TestAssignment({shard}, 2, r, 2, "cuda");
      CudaBackendOptions options;
      options.device = devices[r];
      auto backend = MakeCudaBackend(assignments_[r], options);
      EXPECT_TRUE(backend.ok()) << backend.status().ToString();
      if (!backend.ok()) return {};
      ends[r].backend = std::move(backend).value();
    }
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        BoundaryTransportContext context;
        context.rank = r;
        context.world = 2;
        context.peers = {1 - r};
        context.session = 31;
        if (with_rendezvous) context.rendezvous = rendezvous_.Fn();
        context.timeout = milliseconds(30000);
        auto t = ends[r].backend->BoundaryTransport(*mesh_[r], context, &ends[r].how);
        if (t.ok()) {
          ends[r].transport = std::move(t).value();
        } else {
          ends[r].status = t.status();
        }
      });
    }
    for (auto& t : threads) t.join();
    return ends;
  }

#ifndef PIPECOORD_CUDA_HOST_EMULATION
  // A device tensor of BoundarySpec() from rank 0 arrives at rank 1 byte for byte.
  void ExpectItCarriesATensor(std::vector<RankEnd>& ends) {
    ASSERT_NE(ends[0].transport, nullptr);
    ASSERT_NE(ends[1].transport, nullptr);
    const kernels::TensorSpec spec = ends[0].backend->BoundarySpec();
    std::vector<float> values(static_cast<size_t>(spec.numel()));
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 977) * 0.25f - 3.0f;
    auto sent = ends[0].backend->device().Empty(spec);
    ASSERT_TRUE(sent.ok()) << sent.status().ToString();
    PIPECOORD_ASSERT_OK(ends[0].backend->device().Upload(values.data(), *sent));
    const MessageTag tag{kActivationChannel, 1, 0, 0};
    PIPECOORD_ASSERT_OK(ends[0].transport->Send(1, tag, std::move(*sent)));
    auto got = ends[1].transport->Recv(0, tag, spec, milliseconds(30000));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->memory(), kernels::MemoryKind::kCuda);
    auto back = ends[1].backend->device().DownloadFloats(*got);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, values);
    PIPECOORD_ASSERT_OK(ends[0].transport->Flush(milliseconds(30000)));
  }
#endif

  LocalRendezvous rendezvous_{milliseconds(30000)};
  std::vector<std::unique_ptr<TcpTransport>> mesh_;  // outlives the transports built over it
  v1::Assignment assignments_[2];
};

TEST_F(CudaTransportChoiceTest, TwoRanksOnOneGpuBothStage) {
  std::vector<RankEnd> ends = Choose({0, 0});
  ASSERT_EQ(ends.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(ends[r].status.ok()) << ends[r].status.ToString();
    EXPECT_EQ(ends[r].how.rfind("ranks 0 and 1 share GPU-", 0), 0u) << ends[r].how;
    EXPECT_NE(ends[r].how.find(": NCCL refuses two ranks on one device; boundary tensors staged through the host "
                               "(f32[2, 40, 64])"),
              std::string::npos)
        << ends[r].how;
    EXPECT_EQ(ends[r].how, ends[0].how);  // one decision, from the same cards
  }
#ifdef PIPECOORD_CUDA_HOST_EMULATION
  EXPECT_EQ(ends[0].how,
            "ranks 0 and 1 share GPU-41414141-4141-4141-4141-414141414141 (PCI 0000:0:00.0): NCCL refuses two ranks on "
            "one device; boundary tensors staged through the host (f32[2, 40, 64]); host emulation: no transport built");
  EXPECT_EQ(ends[0].transport, nullptr);
#else
  ExpectItCarriesATensor(ends);
#endif
}

TEST_F(CudaTransportChoiceTest, RanksOnTwoGpusUseNccl) {
#ifndef PIPECOORD_CUDA_HOST_EMULATION
  auto devices = kernels::QueryDevices();
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  if (devices->size() < 2) GTEST_SKIP() << "needs 2 GPUs (" << devices->size() << " visible)";
#endif
  std::vector<RankEnd> ends = Choose({0, 1});
  ASSERT_EQ(ends.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(ends[r].status.ok()) << ends[r].status.ToString();
    EXPECT_EQ(ends[r].how.rfind("every rank on its own GPU: NCCL (f32[2, 40, 64])", 0), 0u) << ends[r].how;
  }
#ifdef PIPECOORD_CUDA_HOST_EMULATION
  EXPECT_EQ(ends[0].transport, nullptr);
#else
  ExpectItCarriesATensor(ends);
#endif
}

TEST_F(CudaTransportChoiceTest, WithoutARendezvousEveryRankStages) {
  std::vector<RankEnd> ends = Choose({0, 0}, /*with_rendezvous=*/false);
  ASSERT_EQ(ends.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(ends[r].status.ok()) << ends[r].status.ToString();
    EXPECT_EQ(ends[r].how.rfind("no rendezvous to agree on a transport with the other ranks: boundary tensors staged "
                                "through the host (f32[2, 40, 64])",
                                0),
              0u)
        << ends[r].how;
  }
#ifndef PIPECOORD_CUDA_HOST_EMULATION
  ExpectItCarriesATensor(ends);
#endif
}

}  // namespace
}  // namespace pipecoord::worker::cuda
