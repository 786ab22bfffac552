// WorkerService.KeepAlive over real gRPC on loopback: each heartbeat on the stream renews the
// worker's lease and is answered in order; a stream held open without heartbeats renews nothing;
// a heartbeat after the lease ran out ends the stream with NOT_FOUND, as the unary call answers;
// and the lease the answers carry grows with the fleet.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/loopback_server.h"
#include "proto/worker.grpc.pb.h"

namespace pipecoord::coordinator {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kLease{1000};

struct Fixture {
  std::unique_ptr<LoopbackServer> server;
  std::unique_ptr<v1::WorkerService::Stub> stub;
  int64_t registered_lease_ms = 0;  // the last Register answer's

  explicit Fixture(int max_heartbeats_per_s = 0) {
    CoordinatorOptions options;
    options.lease = kLease;
    options.max_heartbeats_per_s = max_heartbeats_per_s;
    auto started = LoopbackServer::Start(options);
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    server = std::move(started).value();
    stub = v1::WorkerService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  }
  std::string Register() {
    grpc::ClientContext ctx;
    v1::RegisterRequest req;
    req.set_device_kind("cpu");
    req.set_host("h");
    req.set_data_endpoint("127.0.0.1:1");
    v1::RegisterResponse resp;
    EXPECT_TRUE(stub->Register(&ctx, req, &resp).ok());
    registered_lease_ms = resp.lease_ms();
    return resp.worker_id();
  }
  bool Alive(const std::string& id) {
    for (const v1::WorkerInfo& w : server->core().ListWorkers()) {
      if (w.worker_id() == id) return true;
    }
    return false;
  }
};

TEST(KeepAliveTest, HeartbeatsOnTheStreamRenewTheLeaseAndAreAnsweredInOrder) {
  Fixture f;
  const std::string id = f.Register();
  grpc::ClientContext ctx;
  auto stream = f.stub->KeepAlive(&ctx);
  // 12 beats at lease / 3: four leases' time, alive throughout.
  for (int i = 0; i < 12; ++i) {
    v1::HeartbeatRequest req;
    req.set_worker_id(id);
    req.set_worker_send_ns(1000 + i);
    ASSERT_TRUE(stream->Write(req));
    v1::HeartbeatResponse resp;
    ASSERT_TRUE(stream->Read(&resp)) << "beat " << i;
    EXPECT_EQ(resp.lease_ms(), kLease.count());
    EXPECT_GT(resp.coordinator_recv_ns(), 0);
    EXPECT_LE(resp.coordinator_recv_ns(), resp.coordinator_send_ns());
    ASSERT_TRUE(f.Alive(id)) << "beat " << i;
    std::this_thread::sleep_for(kLease / 3);
  }
  // Silence on the open stream: the lease runs out (an open stream is not a heartbeat).
  std::this_thread::sleep_for(3 * kLease);
  EXPECT_FALSE(f.Alive(id));
  v1::HeartbeatRequest late;
  late.set_worker_id(id);
  ASSERT_TRUE(stream->Write(late));
  v1::HeartbeatResponse resp;
  EXPECT_FALSE(stream->Read(&resp));
  const grpc::Status st = stream->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
  EXPECT_NE(st.error_message().find("is not registered"), std::string::npos) << st.error_message();
}

TEST(KeepAliveTest, AStreamOfAnUnknownWorkerEndsWithNotFound) {
  Fixture f;
  grpc::ClientContext ctx;
  auto stream = f.stub->KeepAlive(&ctx);
  v1::HeartbeatRequest req;
  req.set_worker_id("nobody");
  ASSERT_TRUE(stream->Write(req));
  v1::HeartbeatResponse resp;
  EXPECT_FALSE(stream->Read(&resp));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

// The lease grows with the fleet (CoordinatorOptions::max_heartbeats_per_s): at 10 heartbeats a
// second and one every lease / 3 per worker, n workers need a lease of 3 s x n / 10 (0.3 s each),
// never below the configured 1 s; every Register and Heartbeat answer tells it, a worker beating
// at the fleet's pace keeps its lease past the configured one, and the lease shrinks as they leave.
TEST(KeepAliveTest, TheLeaseGrowsWithTheFleetToKeepHeartbeatsUnderTheRate) {
  Fixture f(/*max_heartbeats_per_s=*/10);
  std::vector<std::string> ids;
  for (int n = 1; n <= 12; ++n) {
    ids.push_back(f.Register());
    EXPECT_EQ(f.registered_lease_ms, std::max<int64_t>(kLease.count(), 300 * n)) << n << " workers";
  }
  grpc::ClientContext ctx;
  auto stream = f.stub->KeepAlive(&ctx);
  auto beat = [&](const std::string& id) {
    v1::HeartbeatRequest req;
    req.set_worker_id(id);
    v1::HeartbeatResponse resp;
    EXPECT_TRUE(stream->Write(req) && stream->Read(&resp)) << id;
    return resp.lease_ms();
  };
  for (const std::string& id : ids) EXPECT_EQ(beat(id), 3600) << id;
  // Silent for twice the configured lease: alive, the fleet's lease (3.6 s) not run out.
  std::this_thread::sleep_for(2 * kLease);
  for (const std::string& id : ids) EXPECT_TRUE(f.Alive(id)) << id;
  for (size_t i = 3; i < ids.size(); ++i) ASSERT_TRUE(f.server->core().Deregister(ids[i]).ok());
  EXPECT_EQ(beat(ids[0]), kLease.count()) << "3 workers: 0.9 s, so the configured 1 s";
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

}  // namespace
}  // namespace pipecoord::coordinator
