// WorkerService.Commands over real gRPC on loopback, when the worker goes away while a command is
// being written: the stream must not start that write after it finished (gRPC frees the call once
// it is finished and idle: a write started later runs on freed memory, which killed a coordinator
// with "free(): invalid pointer" in the soak), and the command must reach the worker's next stream.
// The window (a write decided, not yet made) is widened by SetBeforeStreamWriteForTest, and the
// client cancels inside it.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "coordinator/loopback_server.h"
#include "coordinator/service.h"
#include "jobplan/tiny_spec_for_tests.h"
#include "proto/worker.grpc.pb.h"

namespace pipecoord::coordinator {
namespace {

TEST(CommandStreamTest, ACommandWhoseStreamIsCancelledMidWriteReachesTheNextStream) {
  CoordinatorOptions options;
  options.lease = std::chrono::milliseconds(10'000);
  auto started = LoopbackServer::Start(options);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<LoopbackServer> server = std::move(started).value();
  auto stub = v1::WorkerService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));

  v1::RegisterRequest reg;
  reg.set_device_kind("cpu");
  reg.set_host("h");
  reg.set_data_endpoint("127.0.0.1:1");
  v1::RegisterResponse registered;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->Register(&ctx, reg, &registered).ok());
  }
  v1::CommandsRequest req;
  req.set_worker_id(registered.worker_id());

  // The first stream: open and subscribed (an empty queue writes nothing) before the job comes.
  grpc::ClientContext first;
  auto stream = stub->Commands(&first, req);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  // The next write stops in the window; the client cancels there and the server hears of it.
  std::promise<void> in_window;
  bool once = true;
  SetBeforeStreamWriteForTest([&] {
    if (!once) return;
    once = false;
    in_window.set_value();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  });
  auto submitted = server->core().SubmitJob(jobplan::TinySpec(1), /*dry_run=*/false);
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  ASSERT_EQ(in_window.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the assignment was never written";
  first.TryCancel();
  v1::WorkerCommand lost;
  while (stream->Read(&lost)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // past the window: the server's stream is done
  SetBeforeStreamWriteForTest(nullptr);

  // The worker's next stream gets the assignment the cancelled one never delivered.
  grpc::ClientContext second;
  second.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  auto again = stub->Commands(&second, req);
  v1::WorkerCommand cmd;
  ASSERT_TRUE(again->Read(&cmd)) << "the assignment was lost with the cancelled stream: " << again->Finish().error_message();
  ASSERT_TRUE(cmd.has_assign()) << cmd.DebugString();
  EXPECT_EQ(cmd.assign().job_id(), submitted->job_id());
  second.TryCancel();
  (void)again->Finish();
}

}  // namespace
}  // namespace pipecoord::coordinator
