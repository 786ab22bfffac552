#include "worker/daemon/held_job.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "worker/transport/tcp_transport.h"

namespace pipecoord::worker {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

v1::Assignment SomeAssignment() {
  v1::Assignment a;
  a.set_job_id("job-000007");
  a.set_session(7);
  return a;
}

// Connect waits for a peer that never comes: Cancel must end it at once, not at its timeout.
TEST(HeldJobTest, CancelEndsAConnectThatWaitsForAMissingPeer) {
  HeldJob job(SomeAssignment());
  auto t = TcpTransport::Listen("127.0.0.1", 0);
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(job.AttachTransport(t->get()));
  Status connect;
  Clock::time_point ended;
  std::thread connecting([&] {
    connect = (*t)->Connect(1, {{0, "127.0.0.1:9"}}, 7, std::chrono::seconds(30));  // rank 0 dials us: it never does
    ended = Clock::now();
  });
  std::this_thread::sleep_for(milliseconds(200));
  const Clock::time_point cancelled_at = Clock::now();
  job.Cancel("cancelled by the coordinator");
  connecting.join();
  EXPECT_EQ(connect.code(), Code::kUnavailable);
  EXPECT_EQ(connect.message(), "Connect: the transport was shut down");
  EXPECT_LT(ended - cancelled_at, milliseconds(2000));
  EXPECT_TRUE(job.cancelled());
  EXPECT_EQ(job.cancel_reason(), "cancelled by the coordinator");
  EXPECT_FALSE(job.quiet());
  job.Detach();
}

TEST(HeldJobTest, AttachAfterCancelRefusesSoTheJobNeverStarts) {
  HeldJob job(SomeAssignment());
  job.Cancel("first");
  job.Cancel("second");
  EXPECT_EQ(job.cancel_reason(), "first");
  auto t = TcpTransport::Listen("127.0.0.1", 0);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(job.AttachTransport(t->get()));
}

// Before its run starts a job has done nothing: a graceful stop leaves quietly (no report, no
// release; the worker deregisters and the coordinator queues the job again).
TEST(HeldJobTest, GracefulStopBeforeTheRunLeavesQuietly) {
  HeldJob job(SomeAssignment());
  auto t = TcpTransport::Listen("127.0.0.1", 0);
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(job.AttachTransport(t->get()));
  EXPECT_FALSE(job.StopGracefully());  // no step is running
  EXPECT_TRUE(job.cancelled());
  EXPECT_TRUE(job.quiet());
  EXPECT_EQ(job.cancel_reason(), "the worker is shutting down");
  // The transport was shut down with it: a Connect now fails at once.
  const Status st = (*t)->Connect(1, {{0, "127.0.0.1:9"}}, 7, std::chrono::seconds(30));
  EXPECT_EQ(st.message(), "Connect: the transport was shut down");
  job.Detach();
}

// A cancel that came first is not turned into a quiet leave by a later graceful stop: the
// coordinator hears how it ended.
TEST(HeldJobTest, GracefulStopAfterACancelKeepsTheCancel) {
  HeldJob job(SomeAssignment());
  job.Cancel("cancelled by the coordinator");
  job.StopGracefully();
  EXPECT_FALSE(job.quiet());
  EXPECT_EQ(job.cancel_reason(), "cancelled by the coordinator");
}

}  // namespace
}  // namespace pipecoord::worker
