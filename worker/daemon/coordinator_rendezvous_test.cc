// The daemon's rendezvous against a real coordinator served over gRPC on loopback: two workers
// registered with it hold a pp 2 job, and what one publishes under a key is what the other's wait
// returns; a wait ends at its timeout, or within a slice of a stop; a worker outside the job is
// refused; and the job's transport cards go round through it as through the in-process map.
#include "worker/daemon/coordinator_rendezvous.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "coordinator/loopback_server.h"
#include "jobplan/tiny_spec_for_tests.h"
#include "worker/transport/transport_choice.h"

namespace pipecoord::worker {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class CoordinatorRendezvousTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = coordinator::LoopbackServer::Start({});
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    for (int i = 0; i < 2; ++i) {
      v1::RegisterRequest r;
      r.set_device_kind("cpu");
      r.set_host("127.0.0.1");
      r.set_data_endpoint("127.0.0.1:" + std::to_string(40001 + i));  // never dialled: no rank runs
      auto registered = server_->core().Register(r);
      ASSERT_TRUE(registered.ok()) << registered.status().ToString();
      workers_.push_back(registered->worker_id());
    }
    heartbeats_ = std::thread([this] {
      while (!stop_) {
        for (const std::string& id : workers_) {
          v1::HeartbeatRequest h;
          h.set_worker_id(id);
          (void)server_->core().Heartbeat(h);
        }
        std::this_thread::sleep_for(milliseconds(100));
      }
    });
    auto submitted = server_->core().SubmitJob(jobplan::TinySpec(2));
    ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
    job_ = submitted->job_id();
    // Both workers hold it once the coordinator assigned it.
    const auto give_up = Clock::now() + std::chrono::seconds(30);
    for (;;) {
      int holding = 0;
      for (const v1::WorkerInfo& w : server_->core().ListWorkers()) holding += w.job_id() == job_ ? 1 : 0;
      if (holding == 2) break;
      ASSERT_LT(Clock::now(), give_up) << "the job was not assigned to both workers";
      std::this_thread::sleep_for(milliseconds(10));
    }
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    stub_ = v1::WorkerService::NewStub(channel_);
  }

  void TearDown() override {
    stop_ = true;
    if (heartbeats_.joinable()) heartbeats_.join();
  }

  RendezvousFn For(const std::string& worker_id, milliseconds timeout = milliseconds(10000),
                   std::function<bool()> stopped = {}) {
    CoordinatorRendezvousOptions o;
    o.job_id = job_;
    o.worker_id = [worker_id] { return worker_id; };
    o.timeout = timeout;
    o.stopped = std::move(stopped);
    o.slice = milliseconds(100);
    return CoordinatorRendezvous(stub_.get(), std::move(o));
  }

  std::unique_ptr<coordinator::LoopbackServer> server_;
  std::vector<std::string> workers_;
  std::string job_;
  std::atomic<bool> stop_{false};
  std::thread heartbeats_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
};

TEST_F(CoordinatorRendezvousTest, WhatOneWorkerPublishesIsWhatTheOtherWaitsFor) {
  RendezvousFn a = For(workers_[0]), b = For(workers_[1]);
  // A waiter posted before the value is answered once it comes.
  Result<std::string> early = Unavailable("not run");
  std::thread waiter([&] { early = b("pipecoord/test/late", ""); });
  std::this_thread::sleep_for(milliseconds(300));  // the waiter is inside the coordinator's wait
  auto published = a("pipecoord/test/late", std::string("v\0alue", 6));
  ASSERT_TRUE(published.ok()) << published.status().ToString();
  EXPECT_EQ(*published, std::string("v\0alue", 6));
  waiter.join();
  ASSERT_TRUE(early.ok()) << early.status().ToString();
  EXPECT_EQ(*early, std::string("v\0alue", 6));  // bytes, not text
  // A value already there is answered at once, to the publisher too.
  auto again = a("pipecoord/test/late", "");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, std::string("v\0alue", 6));
}

TEST_F(CoordinatorRendezvousTest, AWaitEndsAtItsTimeoutNamingTheKey) {
  RendezvousFn b = For(workers_[1], milliseconds(400));
  const auto start = Clock::now();
  auto got = b("pipecoord/test/never", "");
  const auto took = Clock::now() - start;
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kUnavailable);
  EXPECT_EQ(got.status().message(), "waiting for \"pipecoord/test/never\" at the coordinator (job " + job_ +
                                        "): nothing was published within 400 ms");
  EXPECT_GE(took, milliseconds(400));
  EXPECT_LT(took, milliseconds(5000));
}

TEST_F(CoordinatorRendezvousTest, AStopEndsAWaitWithinASlice) {
  std::atomic<bool> stopped{false};
  RendezvousFn b = For(workers_[1], milliseconds(120000), [&] { return stopped.load(); });
  Result<std::string> got = Unavailable("not run");
  std::thread waiter([&] { got = b("pipecoord/test/never", ""); });
  std::this_thread::sleep_for(milliseconds(300));
  const auto stop_at = Clock::now();
  stopped = true;
  waiter.join();
  EXPECT_LT(Clock::now() - stop_at, milliseconds(5000));  // the slice is 100 ms; far below the 120 s timeout
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kUnavailable);
  EXPECT_EQ(got.status().message(),
            "waiting for \"pipecoord/test/never\" at the coordinator (job " + job_ + "): the job was stopped");
}

TEST_F(CoordinatorRendezvousTest, AWorkerOutsideTheJobIsRefused) {
  v1::RegisterRequest r;
  r.set_device_kind("cpu");
  r.set_host("127.0.0.1");
  r.set_data_endpoint("127.0.0.1:40009");
  auto outsider = server_->core().Register(r);
  ASSERT_TRUE(outsider.ok()) << outsider.status().ToString();
  auto got = For(outsider->worker_id())("pipecoord/test/k", "v");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kPermissionDenied) << got.status().ToString();
  EXPECT_NE(got.status().message().find("is not part of " + job_), std::string::npos) << got.status().ToString();
  // No worker id at all: the coordinator's metadata rule.
  auto anonymous = For("")("pipecoord/test/k", "v");
  ASSERT_FALSE(anonymous.ok());
  EXPECT_EQ(anonymous.status().code(), Code::kPermissionDenied) << anonymous.status().ToString();
}

// The cards two ranks on one GPU publish: both read both, in rank order, and both stage.
TEST_F(CoordinatorRendezvousTest, TheJobsTransportCardsGoRoundThroughTheCoordinator) {
  nccl_wire::DeviceIdentity gpu;
  gpu.host = "node-a";
  gpu.pci_bus_id = "0000:65:00.0";
  gpu.uuid = std::string(16, 'g');
  std::vector<RankCard> mine(2);
  for (int r = 0; r < 2; ++r) {
    mine[r].rank = r;
    mine[r].peers = {1 - r};
    mine[r].device = gpu;
  }
  std::vector<Result<std::vector<RankCard>>> got(2, Unavailable("not run"));
  std::thread second([&] { got[1] = ExchangeRankCards(mine[1], 2, 77, For(workers_[1]), milliseconds(10000)); });
  got[0] = ExchangeRankCards(mine[0], 2, 77, For(workers_[0]), milliseconds(10000));
  second.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(got[r].ok()) << "rank " << r << ": " << got[r].status().ToString();
    EXPECT_EQ(*got[r], mine);
    const TransportChoice c = ChooseTransport(*got[r]);
    EXPECT_FALSE(c.nccl);
    EXPECT_EQ(c.why.rfind("ranks 0 and 1 share GPU-67676767-6767-6767-6767-676767676767 (PCI 0000:65:00.0): NCCL "
                          "refuses two ranks on one device",
                          0),
              0u)
        << c.why;
  }
}

}  // namespace
}  // namespace pipecoord::worker
