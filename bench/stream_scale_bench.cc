// The coordinator's waiting streams at scale (issue "one coordinator for 16,384 ranks", section 1),
// over real gRPC on loopback: a coordinator and N simulated workers in this process, on gRPC's
// callback client (no thread per simulated worker). Every worker registers, heartbeats at the
// default lease (5 s, every lease / 3 as the daemons do) and holds its command stream. Then K
// small jobs (pp 2) are submitted one after another; each wakes only its two workers' streams.
// Prints, in one run:
//  - the process's threads before and with the N streams open: the server's streams hold no
//    thread (the synchronous API held one per stream: N more), as a ratio threads / N;
//  - each job's time from SubmitJob to both assignments received, against the baseline of one
//    Heartbeat round trip measured in the same run, and the stream wakeups per job (per-waiter
//    wakeups: 2, where one condition variable woke all N);
//  - lease losses over the run (target: none).
// Not a test: bazel run //bench:stream_scale_bench [-- --workers=16384 --jobs=200]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/simulated_worker.h"
#include "coordinator/loopback_server.h"
#include "proto/job.grpc.pb.h"
#include "proto/worker.grpc.pb.h"

namespace {

using namespace pipecoord;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int Threads() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return -1;
}

int Flag(int argc, char** argv, const char* name, int fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return std::atoi(argv[i] + prefix.size());
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress as it comes, also into a pipe
  const int big = Flag(argc, argv, "big", 16384);  // ranks of the one large job: pp 16 x dp big/128 x tp 8
  const int jobs = Flag(argc, argv, "jobs", 200);
  const int workers = Flag(argc, argv, "workers", big + 2 * jobs);
  coordinator::CoordinatorOptions options;  // the default lease, 5 s
  auto server = coordinator::LoopbackServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  coordinator::Coordinator& core = (*server)->core();
  // Several connections, as many hosts would open (HTTP/2 streams of one connection are limited).
  constexpr int kChannels = 32;
  std::vector<std::unique_ptr<v1::WorkerService::Stub>> stubs;
  std::shared_ptr<grpc::Channel> first;
  for (int c = 0; c < kChannels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel = grpc::CreateCustomChannel((*server)->address(), grpc::InsecureChannelCredentials(), args);
    if (!first) first = channel;
    stubs.push_back(v1::WorkerService::NewStub(channel));
  }
  auto jobs_stub = v1::JobService::NewStub(first);
  const int threads_idle = Threads();

  // Heartbeats from the start, for every worker registered so far, every lease / 3.
  std::mutex ids_mu;
  std::vector<std::string> ids;
  std::atomic<bool> stop{false};
  std::atomic<long> beats{0}, beat_failures{0};
  std::thread heart([&] {
    const auto period = options.lease / 3;
    while (!stop) {
      const auto round = Clock::now();
      std::vector<std::string> now;
      {
        std::lock_guard<std::mutex> lock(ids_mu);
        now = ids;
      }
      std::atomic<int> pending{static_cast<int>(now.size())};
      for (size_t i = 0; i < now.size(); ++i) {
        struct Call {
          grpc::ClientContext ctx;
          v1::HeartbeatRequest req;
          v1::HeartbeatResponse resp;
        };
        auto* call = new Call;
        call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        call->req.set_worker_id(now[i]);
        stubs[i % kChannels]->async()->Heartbeat(&call->ctx, &call->req, &call->resp, [&, call](grpc::Status s) {
          if (s.ok()) {
            ++beats;
          } else {
            ++beat_failures;
          }
          delete call;
          --pending;
        });
      }
      while (pending > 0 && !stop) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      while (Clock::now() - round < period && !stop) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });

  const auto reg_start = Clock::now();
  for (int i = 0; i < workers; ++i) {
    grpc::ClientContext ctx;
    v1::RegisterRequest req;
    req.set_device_kind("cpu");
    req.set_host("host-" + std::to_string(i / 8));
    req.set_data_endpoint("127.0.0.1:" + std::to_string(10000 + i % 50000));
    v1::RegisterResponse resp;
    grpc::Status st = stubs[i % kChannels]->Register(&ctx, req, &resp);
    if (!st.ok()) {
      std::fprintf(stderr, "register %d: %s\n", i, st.error_message().c_str());
      return 1;
    }
    std::lock_guard<std::mutex> lock(ids_mu);
    ids.push_back(resp.worker_id());
  }
  const double registering = Since(reg_start);
  std::atomic<int> assigned{0};
  std::vector<std::unique_ptr<bench::CommandReader>> readers;
  const auto open_start = Clock::now();
  for (int i = 0; i < workers; ++i) readers.push_back(std::make_unique<bench::CommandReader>(stubs[i % kChannels].get(), ids[i], &assigned));
  while (core.stream_subscriptions() < static_cast<size_t>(workers) && Since(open_start) < 60) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double opening = Since(open_start);
  const size_t open = core.stream_subscriptions();
  const int threads_streams = Threads();
  std::printf("%d workers registered in %.1f s, %zu command streams open in %.1f s (default lease %lld ms)\n", workers,
              registering, open, opening, static_cast<long long>(options.lease.count()));
  std::printf("threads: %d before, %d with the streams open: %+d for %zu streams (%.4f per stream; the synchronous "
              "API held 1 per stream)\n",
              threads_idle, threads_streams, threads_streams - threads_idle, open,
              open > 0 ? static_cast<double>(threads_streams - threads_idle) / open : 0.0);

  // Baseline: one Heartbeat round trip, the median of 200.
  std::vector<double> rtt;
  for (int i = 0; i < 200; ++i) {
    grpc::ClientContext ctx;
    v1::HeartbeatRequest req;
    req.set_worker_id(ids[0]);
    v1::HeartbeatResponse resp;
    const auto t = Clock::now();
    (void)stubs[0]->Heartbeat(&ctx, req, &resp);
    rtt.push_back(Since(t));
  }
  std::sort(rtt.begin(), rtt.end());
  const double baseline = rtt[rtt.size() / 2];

  // One job of `big` ranks (pp 16 x dp x tp 8, each tp group on one host of 8 workers): SubmitJob
  // (validated, planned, budgeted, placed and dispatched) and every assignment received.
  if (big > 0) {
    v1::SubmitJobRequest submit;
    auto* spec = submit.mutable_spec();
    spec->set_name("big");
    spec->set_schedule("1f1b");
    spec->set_pp(16);
    spec->set_tp(8);
    spec->set_dp(big / 128);
    spec->set_microbatches(32);
    spec->set_micro_batch_size(1);
    spec->set_steps(1000);
    auto* m = spec->mutable_model();
    m->set_layers(32);
    m->set_hidden(64);
    m->set_heads(8);
    m->set_vocab(256);
    m->set_seq_len(16);
    const int want = assigned + big;
    const auto t = Clock::now();
    grpc::ClientContext ctx;
    v1::SubmitJobResponse resp;
    grpc::Status st = jobs_stub->SubmitJob(&ctx, submit, &resp);
    if (!st.ok()) {
      std::fprintf(stderr, "the %d-rank job: %s\n", big, st.error_message().c_str());
      return 1;
    }
    const double submitted = Since(t);
    while (assigned < want && Since(t) < 120) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const double everyone = Since(t);
    std::printf("one job of %d ranks (pp 16 x dp %d x tp 8): SubmitJob answered in %.2f s, %d of %d assignments received "
                "after %.2f s (%.0fx the baseline Heartbeat round trip); threads %d\n",
                big, big / 128, submitted, assigned.load() - (want - big), big, everyone, everyone / baseline, Threads());
    if (assigned < want) return 1;
  }

  // K jobs of pp 2, one after another: each goes to two free workers.
  std::vector<double> latency;
  const int64_t wakeups_before = core.stream_wakeups();
  for (int k = 0; k < jobs; ++k) {
    v1::SubmitJobRequest submit;
    auto* spec = submit.mutable_spec();
    spec->set_schedule("1f1b");
    spec->set_pp(2);
    spec->set_microbatches(2);
    spec->set_micro_batch_size(1);
    spec->set_steps(1000);
    auto* m = spec->mutable_model();
    m->set_layers(2);
    m->set_hidden(8);
    m->set_heads(1);
    m->set_vocab(16);
    m->set_seq_len(4);
    const int want = assigned + 2;
    const auto t = Clock::now();
    grpc::ClientContext ctx;
    v1::SubmitJobResponse resp;
    grpc::Status st = jobs_stub->SubmitJob(&ctx, submit, &resp);
    if (!st.ok()) {
      std::fprintf(stderr, "submit %d: %s\n", k, st.error_message().c_str());
      return 1;
    }
    while (assigned < want && Since(t) < 10) std::this_thread::yield();
    latency.push_back(Since(t));
  }
  const int64_t wakeups = core.stream_wakeups() - wakeups_before;
  std::sort(latency.begin(), latency.end());
  const double p50 = latency[latency.size() / 2], p99 = latency[latency.size() * 99 / 100];
  std::printf("%d jobs (pp 2) with %d streams open: submit -> both assignments received p50 %.2f ms, p99 %.2f ms "
              "(%.1fx / %.1fx the baseline Heartbeat round trip, %.3f ms); %d assignments; %.2f stream wakeups "
              "per job (one condition variable for all woke %d)\n",
              jobs, workers, p50 * 1e3, p99 * 1e3, p50 / baseline, p99 / baseline, baseline * 1e3, assigned.load(),
              static_cast<double>(wakeups) / jobs, workers);
  const int threads_end = Threads();
  stop = true;
  heart.join();
  int lost = 0;
  for (const v1::WorkerInfo& w : core.ListWorkers()) lost += w.worker_id().empty();
  const int live = static_cast<int>(core.ListWorkers().size());
  std::printf("heartbeats %ld ok, %ld failed; workers still holding their lease %d of %d (lease losses %d); threads "
              "at the end %d\n",
              beats.load(), beat_failures.load(), live, workers, workers - live + lost, threads_end);
  for (auto& r : readers) r->Cancel();
  for (int i = 0; i < 500; ++i) {
    if (std::all_of(readers.begin(), readers.end(), [](const auto& r) { return r->done(); })) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const bool ok = open == static_cast<size_t>(workers) && assigned == big + 2 * jobs && live == workers && beat_failures == 0;
  std::printf("%s\n", ok ? "ok" : "MISSED (see above)");
  server->reset();
  return ok ? 0 : 1;
}
