// Coordinator at scale over real gRPC on loopback (issue 5's targets), in one run:
//  1. dispatch: 256 lightweight worker clients hold Commands streams; the time from SubmitJob
//     (pp 256) until every one has its Assignment (target < 1 s), against a baseline of 256
//     sequential Heartbeat round trips in the same run;
//  2. 1024 registered workers heartbeating every lease/4 for several seconds: heartbeats per
//     second, and lease losses (target: none).
//   bazel run //bench:coordinator_bench
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

#include "coordinator/loopback_server.h"
#include "proto/job.grpc.pb.h"
#include "proto/worker.grpc.pb.h"

namespace {

using namespace pipecoord;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string Register(v1::WorkerService::Stub& stub, int i) {
  grpc::ClientContext ctx;
  v1::RegisterRequest req;
  req.set_device_kind("cpu");
  req.set_host("bench");
  req.set_data_endpoint("127.0.0.1:" + std::to_string(20000 + i));
  v1::RegisterResponse resp;
  if (!stub.Register(&ctx, req, &resp).ok()) std::exit(1);
  return resp.worker_id();
}

bool Heartbeat(v1::WorkerService::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::HeartbeatRequest req;
  req.set_worker_id(id);
  v1::HeartbeatResponse resp;
  return stub.Heartbeat(&ctx, req, &resp).ok();
}

}  // namespace

int main() {
  coordinator::CoordinatorOptions options;
  options.lease = std::chrono::milliseconds(2000);
  auto server = coordinator::LoopbackServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  coordinator::Coordinator& core = (*server)->core();
  auto channel = grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials());
  auto wstub = v1::WorkerService::NewStub(channel);
  auto jstub = v1::JobService::NewStub(channel);

  // 1. Dispatch to 256 workers.
  constexpr int kDispatch = 256;
  std::vector<std::string> ids;
  for (int i = 0; i < kDispatch; ++i) ids.push_back(Register(*wstub, i));
  const auto base_start = Clock::now();
  for (const auto& id : ids) Heartbeat(*wstub, id);
  const double baseline = Since(base_start);
  std::atomic<int> assigned{0};
  std::atomic<int> streams{0};
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts(kDispatch);
  std::vector<std::thread> readers;
  Clock::time_point submitted;
  std::vector<double> got_at(kDispatch, 0);
  for (int i = 0; i < kDispatch; ++i) {
    contexts[i] = std::make_unique<grpc::ClientContext>();
    readers.emplace_back([&, i] {
      v1::CommandsRequest req;
      req.set_worker_id(ids[i]);
      auto reader = wstub->Commands(contexts[i].get(), req);
      ++streams;
      v1::WorkerCommand cmd;
      while (reader->Read(&cmd)) {
        if (cmd.has_assign()) {
          got_at[i] = Since(submitted);
          ++assigned;
        }
      }
      reader->Finish();
    });
  }
  while (streams < kDispatch) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let every stream reach the server
  v1::SubmitJobRequest submit;
  auto* spec = submit.mutable_spec();
  spec->set_schedule("1f1b");
  spec->set_pp(kDispatch);
  spec->set_microbatches(kDispatch);
  spec->set_micro_batch_size(1);
  spec->set_steps(1);
  auto* m = spec->mutable_model();
  m->set_layers(kDispatch);
  m->set_hidden(8);
  m->set_heads(1);
  m->set_vocab(16);
  m->set_seq_len(4);
  submitted = Clock::now();
  {
    grpc::ClientContext ctx;
    v1::SubmitJobResponse resp;
    grpc::Status st = jstub->SubmitJob(&ctx, submit, &resp);
    if (!st.ok()) {
      std::fprintf(stderr, "submit: %s\n", st.error_message().c_str());
      return 1;
    }
  }
  while (assigned < kDispatch && Since(submitted) < 30) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const double dispatch = Since(submitted);
  std::printf("dispatch of pp=%d job lists to %d workers: %.3f s (target < 1 s: %s), %.2fx the baseline of "
              "%d sequential heartbeats (%.3f s)\n",
              kDispatch, assigned.load(), dispatch, dispatch < 1 && assigned == kDispatch ? "ok" : "MISSED",
              dispatch / baseline, kDispatch, baseline);
  for (auto& c : contexts) c->TryCancel();
  for (auto& t : readers) t.join();

  // 2. 1024 workers heartbeating every lease/4 for 6 s.
  constexpr int kFleet = 1024, kThreads = 8;
  std::vector<std::string> fleet;
  for (int i = 0; i < kFleet; ++i) fleet.push_back(Register(*wstub, 1000 + i));
  std::atomic<long> beats{0}, lost{0};
  const auto fleet_start = Clock::now();
  std::vector<std::thread> beaters;
  for (int t = 0; t < kThreads; ++t) {
    beaters.emplace_back([&, t] {
      while (Since(fleet_start) < 6) {
        const auto round = Clock::now();
        for (int i = t; i < kFleet; i += kThreads) {
          if (Heartbeat(*wstub, fleet[i])) ++beats; else ++lost;
        }
        std::this_thread::sleep_until(round + options.lease / 4);
      }
    });
  }
  for (auto& t : beaters) t.join();
  const double secs = Since(fleet_start);
  std::set<std::string> registered;
  for (const auto& w : core.ListWorkers()) registered.insert(w.worker_id());
  size_t alive = 0;
  for (const auto& id : fleet) alive += registered.count(id);
  std::printf("%d workers heartbeating every %lld ms for %.1f s: %.0f heartbeats/s, %ld refused, %zu of %d "
              "still hold their lease (target: none lost: %s)\n",
              kFleet, static_cast<long long>(options.lease.count() / 4), secs, beats / secs, lost.load(), alive,
              kFleet, lost == 0 && alive == static_cast<size_t>(kFleet) ? "ok" : "MISSED");
  return 0;
}
