// TelemetryOutbox against a real gRPC server on loopback that the test stops and starts again on
// the same port (a coordinator restarting): batches put while it is away arrive once it is back,
// each step stored once (the server, like the coordinator, drops a step it already has), in
// order; Confirm forgets what is stored; a refusal is sticky; the byte bound drops action timings,
// never summaries; Close gives up at its deadline naming what was not delivered.
#include "worker/daemon/telemetry_outbox.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace pipecoord::worker {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

bool WaitFor(const std::function<bool()>& done, Clock::duration limit = seconds(30)) {
  const auto end = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

// Stores each step's batch once, as the coordinator does (a step it has is acknowledged, not
// stored again); can refuse every stream.
class Store final : public v1::WorkerService::Service {
 public:
  grpc::Status Telemetry(grpc::ServerContext*, grpc::ServerReader<v1::TelemetryBatch>* reader, v1::TelemetryAck*) override {
    v1::TelemetryBatch b;
    while (reader->Read(&b)) {
      std::lock_guard<std::mutex> lock(mu_);
      if (refuse_) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "job-1 is FAILED: no more telemetry");
      ++received_;
      const int step = b.steps(0).step();
      if (step < next_) continue;  // a resend
      if (step != next_) {         // a step skipped: the coordinator refuses it too
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "got step " + std::to_string(step) + ", expected " +
                                                                    std::to_string(next_));
      }
      stored_.push_back(b);
      next_ = step + 1;
    }
    return grpc::Status::OK;
  }
  void Refuse() {
    std::lock_guard<std::mutex> lock(mu_);
    refuse_ = true;
  }
  std::vector<v1::TelemetryBatch> stored() {
    std::lock_guard<std::mutex> lock(mu_);
    return stored_;
  }
  int next() {
    std::lock_guard<std::mutex> lock(mu_);
    return next_;
  }
  int received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }

 private:
  std::mutex mu_;
  std::vector<v1::TelemetryBatch> stored_;
  int next_ = 0, received_ = 0;
  bool refuse_ = false;
};

v1::TelemetryBatch Batch(int step, int actions = 3) {
  v1::TelemetryBatch b;
  b.set_job_id("job-1");
  for (int i = 0; i < actions; ++i) {
    v1::ActionTiming* t = b.add_actions();
    t->set_step(step);
    t->set_start_ns(i);
    t->set_end_ns(i + 1);
  }
  b.add_steps()->set_step(step);
  return b;
}

class TelemetryOutboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Serve(0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_), grpc::InsecureChannelCredentials());
    stub_ = v1::WorkerService::NewStub(channel_);
  }
  void TearDown() override { Down(); }

  void Serve(int port) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&store_);
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_ != nullptr && port_ > 0) << "cannot serve on port " << port;
  }
  void Down() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + milliseconds(200));
    server_.reset();
  }

  Store store_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
};

TEST_F(TelemetryOutboxTest, BatchesPutWhileTheServerIsAwayArriveOnceInOrderWhenItIsBack) {
  TelemetryOutbox::Options o;
  o.retry = milliseconds(50);
  TelemetryOutbox outbox(stub_.get(), o);
  for (int s = 0; s < 3; ++s) ASSERT_TRUE(outbox.Put(Batch(s)).ok());
  ASSERT_TRUE(WaitFor([&] { return store_.next() == 3; }));
  const int port = port_;
  Down();
  for (int s = 3; s < 8; ++s) ASSERT_TRUE(outbox.Put(Batch(s)).ok()) << "Put must not fail while the server is away";
  std::this_thread::sleep_for(milliseconds(300));  // several failed attempts meanwhile
  ASSERT_NO_FATAL_FAILURE(Serve(port));
  for (int s = 8; s < 10; ++s) ASSERT_TRUE(outbox.Put(Batch(s)).ok());
  ASSERT_TRUE(outbox.Close(Clock::now() + seconds(20)).ok());
  const std::vector<v1::TelemetryBatch> stored = store_.stored();
  ASSERT_EQ(stored.size(), 10u);
  for (int s = 0; s < 10; ++s) {
    EXPECT_EQ(stored[s].steps(0).step(), s);
    EXPECT_EQ(stored[s].actions_size(), 3);
  }
  EXPECT_EQ(outbox.dropped_actions(), 0);
  // Nothing was confirmed, so the new stream sent everything again; the store kept each once.
  EXPECT_GE(store_.received(), 10);
}

TEST_F(TelemetryOutboxTest, ConfirmedStepsAreNotSentAgain) {
  TelemetryOutbox::Options o;
  o.retry = milliseconds(50);
  TelemetryOutbox outbox(stub_.get(), o);
  for (int s = 0; s < 4; ++s) ASSERT_TRUE(outbox.Put(Batch(s)).ok());
  ASSERT_TRUE(WaitFor([&] { return store_.next() == 4; }));
  outbox.Confirm(4);  // what a heartbeat's next_telemetry_step says
  EXPECT_EQ(outbox.waiting(), 0u);
  const int port = port_;
  Down();
  ASSERT_TRUE(outbox.Put(Batch(4)).ok());
  ASSERT_NO_FATAL_FAILURE(Serve(port));
  ASSERT_TRUE(outbox.Close(Clock::now() + seconds(20)).ok());
  EXPECT_EQ(store_.next(), 5);
  EXPECT_EQ(store_.received(), 5) << "a confirmed batch was sent again";
}

// Heartbeats confirm what is stored while the sender writes (the coordinator's
// next_telemetry_step): a batch confirmed mid-write must not make the sender drop the next one
// unsent (it once did, counting written batches by position while Confirm shifted them).
TEST_F(TelemetryOutboxTest, ConfirmsArrivingDuringWritesLoseNoStep) {
  TelemetryOutbox outbox(stub_.get());
  std::atomic<bool> done{false};
  std::thread heartbeats([&] {
    while (!done) outbox.Confirm(store_.next());
  });
  constexpr int kSteps = 2000;
  for (int s = 0; s < kSteps; ++s) ASSERT_TRUE(outbox.Put(Batch(s)).ok()) << "step " << s;
  const Status closed = outbox.Close(Clock::now() + seconds(60));
  done = true;
  heartbeats.join();
  ASSERT_TRUE(closed.ok()) << closed.ToString();
  EXPECT_EQ(store_.next(), kSteps);
  EXPECT_EQ(store_.stored().size(), static_cast<size_t>(kSteps));
}

TEST_F(TelemetryOutboxTest, ARefusalIsStickyAndNamesTheCause) {
  TelemetryOutbox outbox(stub_.get());
  store_.Refuse();
  ASSERT_TRUE(outbox.Put(Batch(0)).ok());
  ASSERT_TRUE(WaitFor([&] { return !outbox.status().ok(); }));
  const Status put = outbox.Put(Batch(1));
  EXPECT_EQ(put.code(), Code::kFailedPrecondition);
  EXPECT_EQ(put.message(), "telemetry refused: job-1 is FAILED: no more telemetry");
  EXPECT_EQ(outbox.Close(Clock::now() + seconds(5)).code(), Code::kFailedPrecondition);
}

TEST_F(TelemetryOutboxTest, PastTheBoundOldBatchesLoseTheirActionsNeverTheirSummaries) {
  Down();  // nothing is delivered while the batches pile up
  const size_t one = Batch(0, 100).ByteSizeLong();
  TelemetryOutbox::Options o;
  o.max_bytes = 5 * one;  // room for five whole batches
  o.retry = milliseconds(50);
  TelemetryOutbox outbox(stub_.get(), o);
  for (int s = 0; s < 20; ++s) ASSERT_TRUE(outbox.Put(Batch(s, 100)).ok());
  EXPECT_EQ(outbox.waiting(), 20u);
  // At least the 15 oldest gave up their actions (summary-only batches still take a few bytes
  // each, so one or two more may have); the newest are whole.
  EXPECT_EQ(outbox.dropped_actions() % 100, 0);
  EXPECT_GE(outbox.dropped_actions(), 15 * 100);
  EXPECT_LE(outbox.dropped_actions(), 18 * 100);
  ASSERT_NO_FATAL_FAILURE(Serve(port_));
  ASSERT_TRUE(outbox.Close(Clock::now() + seconds(20)).ok());
  const std::vector<v1::TelemetryBatch> stored = store_.stored();
  ASSERT_EQ(stored.size(), 20u);
  EXPECT_EQ(stored[0].actions_size(), 0);
  EXPECT_EQ(stored[19].actions_size(), 100);
}

TEST_F(TelemetryOutboxTest, CloseGivesUpAtItsDeadlineNamingWhatWasNotDelivered) {
  Down();
  TelemetryOutbox::Options o;
  o.retry = milliseconds(50);
  TelemetryOutbox outbox(stub_.get(), o);
  ASSERT_TRUE(outbox.Put(Batch(0)).ok());
  ASSERT_TRUE(outbox.Put(Batch(1)).ok());
  const auto start = Clock::now();
  const Status st = outbox.Close(Clock::now() + milliseconds(500));
  EXPECT_LT(Clock::now() - start, seconds(10));
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_EQ(st.message(), "telemetry: 2 batch(es) not delivered: no coordinator took them in time");
}

}  // namespace
}  // namespace pipecoord::worker
