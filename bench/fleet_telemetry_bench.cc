// One coordinator for 16,384 ranks (issue "one coordinator for 16,384 ranks", section 1), measured:
// the real coordinator binary in its own process (--state, --http), and 16,384 simulated workers
// in this one, on gRPC's callback client (no thread per worker). Every worker registers,
// heartbeats at the default lease (every lease / 3, as the daemons do) and holds its command
// stream; then one job of 16,384 ranks (pp 16 x tp 8 x dp 128, 1F1B, 32 micro-batches) runs, its
// ranks reporting one TelemetryBatch per step (their job list's actions with timings, and the
// step summary) on their telemetry streams, as worker daemons send them:
//  - paced phases, one step per 8 s (--slow_step_s), then one per second: leases lost, heartbeat round trip p50 /
//    p99 (goal: p99 < lease / 10), steps measured against steps sent, each step's lag from its
//    batches' sending to its measured record (WatchJob), the coordinator's CPU seconds per step
//    and this process's (client) CPU beside it, the state file's growth per step;
//  - a flood phase: steps sent as fast as they are measured (two in flight): the rank-steps per
//    second the coordinator absorbs, the knee;
//  - the coordinator's RSS per connected worker, /metrics' size, and schedule "auto" for a
//    405B-class model on the 16,384 free workers (a dry run), timed.
// The batches' bytes are built once per pipeline rank and step and shared by its 1,024 ranks (a
// header per rank, then the shared body: protobuf concatenation), so the client's CPU is gRPC's.
// Not a test: bazel run //bench:fleet_telemetry_bench [-- --workers=16384 --flood_s=20]
// (--workers must be a multiple of pp x tp = 128).
#include <absl/synchronization/mutex.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/model_405b.h"
#include "bench/simulated_worker.h"
#include "proto/job.grpc.pb.h"
#include "jobplan/telemetry_detail.h"
#include "proto/op_kinds.h"
#include "proto/worker.grpc.pb.h"

namespace {

using namespace pipecoord;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int64_t WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string StringFlag(int argc, char** argv, const char* name, const std::string& fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
  }
  return fallback;
}

double Flag(int argc, char** argv, const char* name, double fallback) {
  const std::string v = StringFlag(argc, argv, name, "");
  return v.empty() ? fallback : std::atof(v.c_str());
}

// CPU seconds (user + system) and RSS (MiB) of a process, from /proc.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream rest(all.substr(all.rfind(')') + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int k = 3; rest >> field; ++k) {  // field 3 is the state; utime is 14, stime 15
    if (k == 14) utime = std::atof(field.c_str());
    if (k == 15) {
      stime = std::atof(field.c_str());
      break;
    }
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double RssMiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  }
  return 0;
}

double FileMiB(const std::string& path) {
  double bytes = 0;
  for (const std::string& p : {path, path + "-wal"}) {
    struct stat st;
    if (stat(p.c_str(), &st) == 0) bytes += static_cast<double>(st.st_size);
  }
  return bytes / (1 << 20);
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// A user's status calls (JobService.ListJobs, what `pipectl status` and the dashboard's list
// make) every 20 ms on a thread of their own while it runs: round trips in seconds. The call is
// answered under the coordinator's core lock, so its latency shows how long that lock is held by
// others (an ingest round stores its rows and runs its checks outside it).
class StatusProbe {
 public:
  explicit StatusProbe(v1::JobService::Stub* stub) : stub_(stub), thread_([this] { Run(); }) {}
  std::vector<double> Stop() {
    stop_ = true;
    thread_.join();
    return lat_;
  }

 private:
  void Run() {
    while (!stop_) {
      grpc::ClientContext ctx;
      v1::ListJobsRequest req;
      v1::ListJobsResponse resp;
      const auto t = Clock::now();
      if (stub_->ListJobs(&ctx, req, &resp).ok()) lat_.push_back(Since(t));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  v1::JobService::Stub* stub_;
  std::atomic<bool> stop_{false};
  std::vector<double> lat_;
  std::thread thread_;  // last: started once the rest exists
};

// One worker's heartbeat stream (WorkerService.KeepAlive), as a daemon holds it: a read always
// pending; Beat() writes the next request once the previous one's write and answer are both in
// (the caller's `beating` flag), and `done` is called with the round trip when they are.
class BeatStream final : public grpc::ClientBidiReactor<v1::HeartbeatRequest, v1::HeartbeatResponse> {
 public:
  using Done = std::function<void(bool ok, double seconds, int64_t lease_ms)>;
  BeatStream(v1::WorkerService::Stub* stub, const std::string& id, Done done) : done_(std::move(done)) {
    req_.set_worker_id(id);
    stub->async()->KeepAlive(&ctx_, this);
    StartRead(&resp_);
    StartCall();
  }
  void Beat() {
    sent_ = Clock::now();
    halves_ = 0;
    StartWrite(&req_);
  }
  bool broken() const { return broken_; }
  void OnWriteDone(bool ok) override { ok ? Half() : Fail(); }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Fail();
      return;
    }
    lease_ms_ = resp_.lease_ms();
    StartRead(&resp_);
    Half();
  }
  void OnDone(const grpc::Status&) override { Fail(); }

 private:
  void Half() {
    if (++halves_ == 2) done_(true, Since(sent_), lease_ms_);
  }
  void Fail() {
    if (!broken_.exchange(true)) done_(false, Since(sent_), 0);
  }
  grpc::ClientContext ctx_;
  v1::HeartbeatRequest req_;
  v1::HeartbeatResponse resp_;
  Clock::time_point sent_;
  std::atomic<int> halves_{0};
  std::atomic<int64_t> lease_ms_{0};
  std::atomic<bool> broken_{false};
  Done done_;
};

// The coordinator binary, started with its output in a file; the address it prints.
struct CoordinatorProcess {
  pid_t pid = -1;
  std::string grpc_addr;
  int http_port = 0;

  bool Start(const std::string& binary, const std::string& dir, const std::string& state, int64_t lease_ms,
             int64_t keepalive_ms, int64_t max_heartbeats_per_s) {
    const std::string log = dir + "/coordinator.log";
    std::vector<std::string> args = {binary,  "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--state", state,
                                     "--lease-ms", std::to_string(lease_ms), "--keepalive-ms",
                                     std::to_string(keepalive_ms), "--max-heartbeats-per-s",
                                     std::to_string(max_heartbeats_per_s)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {  // the child: it dies with this process, however this one ends
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) _exit(127);
      dup2(fd, 1);
      dup2(fd, 2);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    for (int i = 0; i < 200 && (grpc_addr.empty() || http_port == 0); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::ifstream in(log);
      std::string line;
      while (std::getline(in, line)) {
        if (line.rfind("coordinator listening on ", 0) == 0) grpc_addr = line.substr(25);
        if (line.rfind("coordinator http on ", 0) == 0) {
          const size_t colon = line.find(':', 20);
          http_port = std::atoi(line.c_str() + colon + 1);
        }
      }
    }
    return !grpc_addr.empty() && http_port != 0;
  }
  ~CoordinatorProcess() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  }
};

// GET http://127.0.0.1:port/path: the body's size in bytes (-1 on error).
long HttpBodyBytes(int port, const std::string& path) {
  const std::string cmd = "/usr/bin/curl -s -o /dev/null -w '%{size_download}' http://127.0.0.1:" +
                          std::to_string(port) + path;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  long n = -1;
  if (std::fscanf(p, "%ld", &n) != 1) n = -1;
  pclose(p);
  return n;
}

// The bytes of one message, as a refcounted slice many ByteBuffers can share.
grpc::Slice SliceOf(const google::protobuf::Message& m) {
  const std::string bytes = m.SerializeAsString();
  return grpc::Slice(bytes);
}

// A rank's telemetry stream, raw bytes: its header slice, then each step's shared body.
class TelemetryWriter final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  TelemetryWriter(grpc::GenericStub* stub, grpc::Slice header) : header_(std::move(header)) {
    stub->PrepareBidiStreamingCall(&ctx_, "/pipecoord.v1.WorkerService/Telemetry", grpc::StubOptions(), this);
    StartRead(&ack_);
    StartCall();
  }
  // Queues a step's body; written after the ones before it. StartWrite is called with no lock
  // held (a reaction may run on the calling thread).
  void Send(const grpc::Slice& body) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(body);
      if (writing_ || !NextLocked()) return;
    }
    StartWrite(&out_);
  }
  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (!ok) {
        failed_ = true;
        return;
      }
      ++written_;
      if (!NextLocked()) return;
    }
    StartWrite(&out_);
  }
  void OnReadDone(bool) override {}
  void OnDone(const grpc::Status& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = s;
    done_ = true;
  }
  void Finish() { StartWritesDone(); }  // at the end of the run, nothing queued or in flight matters
  int64_t written() {
    std::lock_guard<std::mutex> lock(mu_);
    return written_;
  }
  bool failed() {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_ || (done_ && !status_.ok());
  }

 private:
  // The next queued body into out_ (header first); false when none.
  bool NextLocked() {
    if (queue_.empty()) return false;
    grpc::Slice parts[2] = {header_, queue_.front()};
    queue_.pop_front();
    out_ = grpc::ByteBuffer(parts, 2);
    writing_ = true;
    return true;
  }

  grpc::ClientContext ctx_;
  grpc::Slice header_;
  grpc::ByteBuffer out_, ack_;
  std::mutex mu_;
  std::deque<grpc::Slice> queue_;
  bool writing_ = false, failed_ = false, done_ = false;
  int64_t written_ = 0;
  grpc::Status status_;
};

// The job's measured steps, as WatchJob streams them: when each step's record arrived.
class StepWatcher final : public grpc::ClientReadReactor<v1::JobUpdate> {
 public:
  StepWatcher(v1::JobService::Stub* stub, const std::string& job) {
    req_.set_job_id(job);
    stub->async()->WatchJob(&ctx_, &req_, this);
    StartRead(&update_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (update_.event().empty() && update_.step_time_s() > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      measured_at_[update_.step()] = Clock::now();
    }
    StartRead(&update_);
  }
  void OnDone(const grpc::Status& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = "code " + std::to_string(s.error_code()) + ": " + s.error_message();
  }
  void Cancel() { ctx_.TryCancel(); }
  // Why the stream ended ("" while it runs): a stream that ends early counts no more steps, so a
  // flood that measured fewer than it sent says whether the watcher or the coordinator stopped.
  std::string Ended() {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_;
  }
  int measured() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(measured_at_.size());
  }
  bool At(int step, Clock::time_point* t) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = measured_at_.find(step);
    if (it == measured_at_.end()) return false;
    *t = it->second;
    return true;
  }

 private:
  grpc::ClientContext ctx_;
  v1::WatchJobRequest req_;
  v1::JobUpdate update_;
  std::mutex mu_;
  std::map<int, Clock::time_point> measured_at_;
  std::string ended_;
};

double ClientCpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's abseil (gRPC's mutexes) is built with deadlock detection on: every lock walks a
  // graph of every mutex alive (a set per connection), and with 16,384 connections the fleet
  // bench's client spent 29% of its CPU in it (GraphCycles::GetId). Off: it only ever reports.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int workers = static_cast<int>(Flag(argc, argv, "workers", 16384));
  const int pp = 16, tp = 8, microbatches = 32;
  const double flood_s = Flag(argc, argv, "flood_s", 20);
  const int slow_steps = static_cast<int>(Flag(argc, argv, "slow_steps", 4));   // at one step per slow_step_s
  const double slow_step_s = std::max(1.0, Flag(argc, argv, "slow_step_s", 8));  // whole seconds
  const int fast_steps = static_cast<int>(Flag(argc, argv, "fast_steps", 15));  // at one step per second
  if (workers % (pp * tp) != 0) {
    std::fprintf(stderr, "--workers must be a multiple of %d\n", pp * tp);
    return 2;
  }
  const int dp = workers / (pp * tp);
  char dir_template[] = "/tmp/fleet_bench.XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string state = dir + "/state.db";
  CoordinatorProcess coord;
  // The coordinator's least lease (its default 5 s: --lease_ms) and the heartbeat rate it grows
  // the lease to stay under (its default 2,000 a second: --max_heartbeats_per_s; 0: fixed).
  const auto kLease = std::chrono::milliseconds(static_cast<int64_t>(Flag(argc, argv, "lease_ms", 5000)));
  const auto max_beats = static_cast<int64_t>(Flag(argc, argv, "max_heartbeats_per_s", 2000));
  // The lease the coordinator told last (Register and Heartbeat answers): the workers beat every
  // third of it, as the daemons do.
  std::atomic<int64_t> told_ms{kLease.count()};
  auto third = [&] { return std::chrono::milliseconds(told_ms.load()) / 3; };
  if (!coord.Start(StringFlag(argc, argv, "coordinator", "coordinator/coordinator"), dir, state, kLease.count(),
                   static_cast<int64_t>(Flag(argc, argv, "keepalive_ms", 10000)), max_beats)) {
    std::fprintf(stderr, "the coordinator did not start (%s/coordinator.log)\n", dir.c_str());
    return 1;
  }
  const double rss_idle = RssMiB(coord.pid);
  // Connections to the coordinator: one per worker as in a real fleet (--channels=N shares them:
  // N TCP connections, each carrying workers / N workers' streams).
  const int kChannels = std::clamp(static_cast<int>(Flag(argc, argv, "channels", workers)), 1, workers);
  std::vector<std::unique_ptr<v1::WorkerService::Stub>> stubs;
  std::vector<std::unique_ptr<grpc::GenericStub>> raw;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int c = 0; c < kChannels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxReceiveMessageSize(256 << 20);
    auto channel = grpc::CreateCustomChannel(coord.grpc_addr, grpc::InsecureChannelCredentials(), args);
    channels.push_back(channel);
    stubs.push_back(v1::WorkerService::NewStub(channel));
    raw.push_back(std::make_unique<grpc::GenericStub>(channel));
  }
  grpc::ChannelArguments jargs;
  jargs.SetMaxReceiveMessageSize(256 << 20);
  auto jobs_stub = v1::JobService::NewStub(
      grpc::CreateCustomChannel(coord.grpc_addr, grpc::InsecureChannelCredentials(), jargs));

  // Registration (8 threads), then heartbeats every lease / 3 from one thread, asynchronously,
  // each round trip timed.
  std::vector<std::string> ids(workers);
  // Connections first (a worker daemon connects before it registers): registering over thousands
  // of fresh connections took longer than a lease, and the first workers' leases expired before
  // their first heartbeat.
  const auto connect_start = Clock::now();
  {
    std::vector<std::thread> conns;
    for (int t = 0; t < 8; ++t) {
      conns.emplace_back([&, t] {
        for (int c = t; c < kChannels; c += 8) {
          channels[c]->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(60));
        }
      });
    }
    for (auto& t : conns) t.join();
  }
  const double connecting = Since(connect_start);
  // Heartbeats start with the first registration: registering 16,384 workers takes longer than
  // a lease, and the first ones' leases ran out before their first beat.
  std::unique_ptr<std::atomic<bool>[]> registered(new std::atomic<bool>[workers]);
  for (int i = 0; i < workers; ++i) registered[i] = false;
  std::atomic<bool> stop{false};
  std::mutex lat_mu;
  std::vector<double> latencies;  // of the current phase
  std::atomic<long> beats{0}, beat_failures{0};
  // Each worker beats every lease / 3 unless its previous beat is still out (a daemon's beat is
  // one blocking call at a time): one slow answer delays that worker only, as with real daemons.
  std::unique_ptr<std::atomic<bool>[]> beating(new std::atomic<bool>[workers]);
  for (int i = 0; i < workers; ++i) beating[i] = false;
  std::atomic<long> beats_skipped{0};
  std::atomic<double> beat_max{0};
  // The longest a registered worker went between two beats sent (this client's own pace: over
  // the lease, a lost lease is the simulator's, not the coordinator's).
  std::vector<Clock::time_point> last_sent(workers);
  std::atomic<double> gap_max{0};
  // Unary Heartbeat calls, or each worker's KeepAlive stream (--heartbeat=stream|unary: the job's
  // phases; the comparison phase runs both).
  const bool stream_beats = StringFlag(argc, argv, "heartbeat", "stream") == "stream";
  std::atomic<bool> use_stream{false};  // unary while the workers register
  std::vector<std::unique_ptr<BeatStream>> beat_streams(workers);
  std::unique_ptr<std::atomic<int64_t>[]> lease_of(new std::atomic<int64_t>[workers]);
  for (int i = 0; i < workers; ++i) lease_of[i] = kLease.count();
  auto beat_done = [&](int i, bool ok, double took, int64_t lease_ms) {
    if (ok) {
      if (lease_ms > 0) told_ms = lease_ms, lease_of[i] = lease_ms;
      ++beats;
      std::lock_guard<std::mutex> lock(lat_mu);
      latencies.push_back(took);
    } else {
      ++beat_failures;
    }
    for (double m = beat_max; took > m && !beat_max.compare_exchange_weak(m, took);) {
    }
    beating[i] = false;
  };
  // Each worker beats every third of the lease it was told last (its Register answer, then its
  // beats' answers), from its registration on, as a daemon does: the lease grows as the fleet
  // registers, so early workers beat at a shorter lease until their next answer.
  std::thread heart([&] {
    while (!stop) {
      const auto now = Clock::now();
      for (int i = 0; i < workers && !stop; ++i) {
        if (!registered[i].load(std::memory_order_acquire)) continue;  // nothing to renew yet
        if (last_sent[i] == Clock::time_point()) {
          last_sent[i] = now;  // registered: its lease runs from about now
          continue;
        }
        if (now - last_sent[i] < std::chrono::milliseconds(lease_of[i].load()) / 3) continue;
        if (beating[i].exchange(true)) {
          ++beats_skipped;
          continue;
        }
        const double gap = std::chrono::duration<double>(now - last_sent[i]).count();
        for (double m = gap_max; gap > m && !gap_max.compare_exchange_weak(m, gap);) {
        }
        last_sent[i] = now;
        if (use_stream.load()) {
          if (beat_streams[i] == nullptr) {
            beat_streams[i] = std::make_unique<BeatStream>(stubs[i % kChannels].get(), ids[i],
                                                           [&, i](bool ok, double took, int64_t lease_ms) {
                                                             beat_done(i, ok, took, lease_ms);
                                                           });
          }
          if (beat_streams[i]->broken()) {
            ++beat_failures;  // its lease runs out: counted below as lost
            beating[i] = false;
          } else {
            beat_streams[i]->Beat();
          }
          continue;
        }
        struct Call {
          grpc::ClientContext ctx;
          v1::HeartbeatRequest req;
          v1::HeartbeatResponse resp;
          Clock::time_point sent = Clock::now();
        };
        auto* call = new Call;
        call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        call->req.set_worker_id(ids[i]);
        stubs[i % kChannels]->async()->Heartbeat(&call->ctx, &call->req, &call->resp, [&, call, i](grpc::Status s) {
          const double took = Since(call->sent);
          const int64_t lease_ms = call->resp.lease_ms();
          delete call;
          beat_done(i, s.ok(), took, lease_ms);
        });
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  const auto reg_start = Clock::now();
  {
    std::vector<std::thread> regs;
    std::atomic<bool> failed{false};
    for (int t = 0; t < 8; ++t) {
      regs.emplace_back([&, t] {
        for (int i = t; i < workers; i += 8) {
          grpc::ClientContext ctx;
          v1::RegisterRequest req;
          req.set_device_kind("cpu");
          req.set_device_memory_bytes(uint64_t{80} << 30);
          req.set_host("host-" + std::to_string(i / 8));
          req.set_data_endpoint("127.0.0.1:" + std::to_string(10000 + i % 50000));
          v1::RegisterResponse resp;
          if (!stubs[i % kChannels]->Register(&ctx, req, &resp).ok()) failed = true;
          ids[i] = resp.worker_id();
          if (resp.lease_ms() > 0) told_ms = resp.lease_ms(), lease_of[i] = resp.lease_ms();
          registered[i].store(true, std::memory_order_release);
        }
      });
    }
    for (auto& t : regs) t.join();
    if (failed) {
      std::fprintf(stderr, "a registration failed\n");
      std::_Exit(1);  // the heartbeat thread and the streams are not wound down
    }
  }
  const double registering = Since(reg_start);
  auto take_latencies = [&] {
    std::lock_guard<std::mutex> lock(lat_mu);
    std::vector<double> out;
    out.swap(latencies);
    return out;
  };

  std::atomic<int> assigned{0};
  std::vector<std::unique_ptr<bench::CommandReader>> readers;
  for (int i = 0; i < workers; ++i) readers.push_back(std::make_unique<bench::CommandReader>(stubs[i % kChannels].get(), ids[i], &assigned));
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const double rss_fleet = RssMiB(coord.pid);
  std::printf("%d connections in %.1f s; %d workers registered in %.1f s, each holding its command stream; coordinator RSS "
              "%.0f MiB idle, %.0f MiB with them: %.1f KiB per connected worker\n",
              kChannels, connecting, workers, registering, rss_idle, rss_fleet, (rss_fleet - rss_idle) * 1024 / workers);

  // Heartbeats alone, unary calls and then each worker's KeepAlive stream, the same workers at
  // the same pace (lease / 3): what a beat costs the coordinator and this client either way.
  if (const double compare_s = Flag(argc, argv, "compare_heartbeat_s", 15); compare_s > 0) {
    struct Beats {
      double coordinator_cpu = 0, client_cpu = 0, p50 = 0, p99 = 0;
      long ok = 0, failed = 0;
    };
    auto measure = [&](bool stream) {
      use_stream = stream;
      std::this_thread::sleep_for(third() + std::chrono::milliseconds(500));  // a round in the mode first
      (void)take_latencies();
      const long ok0 = beats, failed0 = beat_failures;
      const double c0 = CpuSeconds(coord.pid), m0 = CpuSeconds(getpid());
      std::this_thread::sleep_for(std::chrono::duration<double>(compare_s));
      Beats b;
      b.coordinator_cpu = CpuSeconds(coord.pid) - c0;
      b.client_cpu = CpuSeconds(getpid()) - m0;
      b.ok = beats - ok0;
      b.failed = beat_failures - failed0;
      const std::vector<double> lat = take_latencies();
      b.p50 = Percentile(lat, 0.5) * 1e3;
      b.p99 = Percentile(lat, 0.99) * 1e3;
      std::printf("heartbeats only (lease %.1f s, a beat every %.2f s), %s, %.0f s: %ld answered, %ld failed (%.0f a second); coordinator %.0f%% of one core "
                  "(%.1f us a beat), this client %.0f%% (%.1f us a beat); round trip p50 %.1f ms, p99 %.1f ms\n",
                  told_ms.load() / 1000.0, told_ms.load() / 3000.0,
                  stream ? "each worker's KeepAlive stream" : "unary Heartbeat calls (baseline)", compare_s, b.ok,
                  b.failed, b.ok / compare_s, 100 * b.coordinator_cpu / compare_s, 1e6 * b.coordinator_cpu / std::max(1L, b.ok),
                  100 * b.client_cpu / compare_s, 1e6 * b.client_cpu / std::max(1L, b.ok), b.p50, b.p99);
      std::fflush(stdout);
      return b;
    };
    const Beats unary = measure(false), stream = measure(true);
    const double per_unary = unary.coordinator_cpu / std::max(1L, unary.ok), per_stream = stream.coordinator_cpu / std::max(1L, stream.ok);
    std::printf("coordinator CPU per heartbeat: stream / unary = %.2f; p99 round trip stream / unary = %.2f\n",
                per_stream / per_unary, stream.p99 / std::max(1e-9, unary.p99));
  }
  use_stream = stream_beats;
  std::printf("heartbeats from here on: %s\n", stream_beats ? "each worker's KeepAlive stream" : "unary Heartbeat calls");

  // The baseline of the status probe: 2 s before the job, the fleet heartbeating.
  std::vector<double> idle_status;
  {
    StatusProbe probe(jobs_stub.get());
    std::this_thread::sleep_for(std::chrono::seconds(2));
    idle_status = probe.Stop();
  }
  std::printf("a status call (ListJobs) before the job, the fleet heartbeating: p50 %.1f ms, p99 %.1f ms (%zu calls)\n",
              Percentile(idle_status, 0.5) * 1e3, Percentile(idle_status, 0.99) * 1e3, idle_status.size());

  // The job of 16,384 ranks.
  std::string job;
  jobplan::TelemetryDetail detail;  // what its workers send of each step
  {
    v1::SubmitJobRequest req;
    v1::JobSpec* s = req.mutable_spec();
    s->set_name("fleet");
    s->set_schedule("1f1b");
    s->set_pp(pp);
    s->set_tp(tp);
    s->set_dp(dp);
    s->set_microbatches(microbatches);
    s->set_micro_batch_size(1);
    s->set_steps(100000);
    s->mutable_health()->set_probes_off(true);  // probes need the kernels' checksums
    // Telemetry detail (jobplan/telemetry_detail.h); unset: the defaults for the job's size.
    s->mutable_health()->set_detail_every(static_cast<int>(Flag(argc, argv, "detail_every", 0)));
    s->mutable_health()->set_tp_speaker(StringFlag(argc, argv, "tp_speaker", ""));
    s->mutable_health()->set_detail_replicas(StringFlag(argc, argv, "detail_replicas", ""));
    detail = jobplan::TelemetryDetailOf(*s);
    v1::ModelSpec* m = s->mutable_model();
    m->set_layers(32);
    m->set_hidden(64);
    m->set_heads(8);
    m->set_vocab(256);
    m->set_seq_len(16);
    grpc::ClientContext ctx;
    v1::SubmitJobResponse resp;
    const auto t = Clock::now();
    grpc::Status st = jobs_stub->SubmitJob(&ctx, req, &resp);
    if (!st.ok()) {
      std::fprintf(stderr, "the job: %s\n", st.error_message().c_str());
      std::_Exit(1);
    }
    job = resp.job_id();
    const double submitted = Since(t);
    while (assigned < workers && Since(t) < 120) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::printf("one job of %d ranks (pp %d x tp %d x dp %d, 1F1B, %d micro-batches): SubmitJob answered in %.2f s, %d of "
                "%d assignments received %.2f s after it was sent\n",
                workers, pp, tp, dp, microbatches, submitted, assigned.load(), workers, Since(t));
    if (assigned < workers) {  // why: workers whose lease ran out, heartbeats that failed
      grpc::ClientContext ctx;
      v1::ListWorkersResponse resp;
      const bool listed = jobs_stub->ListWorkers(&ctx, v1::ListWorkersRequest(), &resp).ok();
      std::printf("not started: %d of %d workers registered now; heartbeats %ld ok, %ld failed, slowest %.2f s; the "
                  "longest a worker went between beats sent: %.2f s (lease %.1f s)\n",
                  listed ? resp.workers_size() : -1, workers, beats.load(), beat_failures.load(), beat_max.load(),
                  gap_max.load(), told_ms.load() / 1000.0);
      std::fflush(stdout);
      std::_Exit(1);
    }
  }

  // Each rank's header; each pipeline rank's action list (the same on its tp and dp ranks).
  std::vector<grpc::Slice> headers(workers);
  std::vector<std::vector<v1::Action>> lists(pp);
  for (int i = 0; i < workers; ++i) {
    const v1::Assignment a = readers[i]->assignment();
    v1::TelemetryBatch h;
    h.set_worker_id(ids[i]);
    h.set_job_id(a.job_id());
    h.set_rank(a.rank());
    h.set_dp_rank(a.dp_rank());
    h.set_tp_rank(a.tp_rank());
    h.set_session(a.session());
    headers[i] = SliceOf(h);
    if (lists[a.rank()].empty()) lists[a.rank()].assign(a.jobs().actions().begin(), a.jobs().actions().end());
  }
  std::vector<int> pipeline_of(workers), tp_of(workers), dp_of(workers);
  for (int i = 0; i < workers; ++i) {
    pipeline_of[i] = readers[i]->assignment().rank();
    tp_of[i] = readers[i]->assignment().tp_rank();
    dp_of[i] = readers[i]->assignment().dp_rank();
  }
  std::printf("telemetry: every action of steps < %d and of every %d-th step from %s, the others folded by kind; %s\n",
              detail.first, detail.every, detail.first_replica ? "replica 0" : "every replica",
              detail.tp_speaker ? "tp rank 0 speaks for its group's timings" : "every tp rank sends its timings");
  size_t per_step = 0;
  for (int i = 0; i < workers; ++i) per_step += lists[pipeline_of[i]].size();
  std::printf("actions per step: %zu in all, %zu to %zu per rank\n", per_step,
              std::min_element(lists.begin(), lists.end(), [](auto& a, auto& b) { return a.size() < b.size(); })->size(),
              std::max_element(lists.begin(), lists.end(), [](auto& a, auto& b) { return a.size() < b.size(); })->size());

  // A step's body for pipeline rank r and tp rank `tp_rank`: its actions, back to back from `t0`
  // (each compute action `action_ns`), as a worker daemon sends them (`how`), and its summary.
  auto body = [&](int r, int dp_rank, int tp_rank, int step, int64_t t0, int64_t action_ns,
                  const jobplan::TelemetryDetail& how) {
    v1::TelemetryBatch b;
    std::vector<v1::ActionTiming> timings;
    int64_t t = t0;
    for (const v1::Action& a : lists[r]) {
      v1::ActionTiming* timing = &timings.emplace_back();
      *timing->mutable_action() = a;
      const bool compute = v1::IsCompute(a.op());
      timing->set_step(step);
      timing->set_start_ns(t);
      timing->set_end_ns(compute ? t + action_ns : t);
      timing->set_wait_peer(-1);
      if (compute) t += action_ns;
    }
    jobplan::PutStepTimings(how, dp_rank, tp_rank, step, std::move(timings), &b);
    v1::StepSummary* s = b.add_steps();
    s->set_step(step);
    s->set_has_loss(r == pp - 1);
    s->set_loss(2.0);
    // Under every rank's budget (0.33 MiB for this model): the memory check stays quiet, as on a
    // healthy run (over it, each of the 16,384 ranks raises an event).
    s->set_memory_peak_bytes(64 << 10);
    s->set_memory_in_use_bytes(64 << 10);
    return std::make_pair(SliceOf(b), static_cast<size_t>(b.actions_size() + b.totals_size()));
  };

  StepWatcher watcher(jobs_stub.get(), job);
  std::vector<std::unique_ptr<TelemetryWriter>> writers;
  for (int i = 0; i < workers; ++i) writers.push_back(std::make_unique<TelemetryWriter>(raw[i % kChannels].get(), headers[i]));
  int next_step = 0;
  const jobplan::TelemetryDetail every_action;  // the baseline: every step whole, every rank speaking
  size_t records_sent = 0;                       // actions and totals, since the last take
  auto send_step = [&](double step_s, const jobplan::TelemetryDetail& how) {
    const int64_t action_ns = static_cast<int64_t>(step_s * 1e9 * 0.5 / (2 * microbatches));
    // One body per pipeline rank, for replica 0 or another, tp rank 0 or another.
    std::vector<grpc::Slice> bodies;
    std::vector<size_t> records;
    for (int r = 0; r < pp; ++r) {
      for (const int replica : {0, 1}) {
        for (const int shard : {0, 1}) {
          auto [b, n] = body(r, replica, shard, next_step, WallNs() - static_cast<int64_t>(step_s * 1e9), action_ns, how);
          bodies.push_back(std::move(b));
          records.push_back(n);
        }
      }
    }
    for (int i = 0; i < workers; ++i) {
      const size_t k = 4 * pipeline_of[i] + (dp_of[i] == 0 ? 0 : 2) + (tp_of[i] == 0 ? 0 : 1);
      writers[i]->Send(bodies[k]);
      records_sent += records[k];
    }
    return next_step++;
  };
  auto wait_measured = [&](int through, double timeout_s) {
    const auto t = Clock::now();
    while (watcher.measured() <= through && Since(t) < timeout_s) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return watcher.measured() > through;
  };

  struct Phase {
    std::string name;
    int steps = 0;
    double seconds = 0, coord_cpu = 0, client_cpu = 0, state_mib = 0, lag_p50 = 0, lag_max = 0, beat_p50 = 0, beat_p99 = 0;
    int measured = 0;
  };
  std::vector<Phase> phases;
  take_latencies();
  for (const bool slow : {true, false}) {
    const double step_s = slow ? slow_step_s : 1.0;
    Phase ph;
    ph.name = "one step per " + std::to_string(static_cast<int>(step_s)) + " s";
    const int steps = slow ? slow_steps : fast_steps;
    if (steps == 0) continue;
    const double cpu0 = CpuSeconds(coord.pid), me0 = ClientCpuSeconds(), state0 = FileMiB(state);
    const int first = next_step;
    std::vector<Clock::time_point> sent_at;
    const auto start = Clock::now();
    for (int k = 0; k < steps; ++k) {
      sent_at.push_back(Clock::now());
      send_step(step_s, detail);
      std::this_thread::sleep_until(start + std::chrono::duration<double>((k + 1) * step_s));
    }
    wait_measured(next_step - 1, 60);
    ph.seconds = Since(start);
    ph.steps = steps;
    ph.coord_cpu = CpuSeconds(coord.pid) - cpu0;
    ph.client_cpu = ClientCpuSeconds() - me0;
    ph.state_mib = FileMiB(state) - state0;
    std::vector<double> lags;
    for (int k = 0; k < steps; ++k) {
      Clock::time_point at;
      if (watcher.At(first + k, &at)) lags.push_back(std::chrono::duration<double>(at - sent_at[k]).count());
    }
    ph.measured = static_cast<int>(lags.size());
    ph.lag_p50 = Percentile(lags, 0.5);
    ph.lag_max = lags.empty() ? 0 : *std::max_element(lags.begin(), lags.end());
    const std::vector<double> lat = take_latencies();
    ph.beat_p50 = Percentile(lat, 0.5);
    ph.beat_p99 = Percentile(lat, 0.99);
    phases.push_back(ph);
    std::printf("%s: %d steps sent, %d measured; step lag (sent -> record) p50 %.2f s, max %.2f s; coordinator CPU %.2f s "
                "per step (%.0f%% of one core), this client %.2f s per step; state file +%.2f MiB per step; heartbeat "
                "p50 %.1f ms, p99 %.1f ms (lease / 10 = %lld ms)\n",
                ph.name.c_str(), ph.steps, ph.measured, ph.lag_p50, ph.lag_max, ph.coord_cpu / steps,
                100 * ph.coord_cpu / ph.seconds, ph.client_cpu / steps, ph.state_mib / steps, ph.beat_p50 * 1e3,
                ph.beat_p99 * 1e3, static_cast<long long>(told_ms.load() / 10));
  }

  // Flood: the next step goes out when all but the last two are measured; first as the job's
  // telemetry detail sends it, then every action of every rank (the baseline: what every step
  // cost before the totals). Returns the rank-steps absorbed per second.
  auto flood = [&](const char* name, const jobplan::TelemetryDetail& how) {
    const double cpu0 = CpuSeconds(coord.pid), me0 = ClientCpuSeconds();
    const int first = next_step;
    const int measured0 = watcher.measured();
    records_sent = 0;
    StatusProbe probe(jobs_stub.get());
    const auto start = Clock::now();
    while (Since(start) < flood_s) {
      if (next_step - (watcher.measured() + first - measured0) < 2) {
        send_step(0.05, how);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    const int sent = next_step - first;
    wait_measured(next_step - 1, 120);
    const double took = Since(start);
    const int got = watcher.measured() - measured0;
    const std::vector<double> lat = take_latencies();
    const double coord_cpu = CpuSeconds(coord.pid) - cpu0, client_cpu = ClientCpuSeconds() - me0;
    std::printf("flood, %s, for %.0f s: %d steps sent (%.1f records per rank-step), %d measured in %.1f s: %.2f steps/s = "
                "%.0f rank-steps/s absorbed (%.0f actions/s); coordinator CPU %.0f%% of one core (%.2f ms per rank-step), "
                "this client %.0f%%; heartbeat p50 %.1f ms, p99 %.1f ms\n",
                name, flood_s, sent, records_sent / std::max(1.0, static_cast<double>(sent) * workers), got, took,
                got / took, got * workers / took, got * static_cast<double>(per_step) / took, 100 * coord_cpu / took,
                1e3 * coord_cpu / std::max(1.0, static_cast<double>(got) * workers), 100 * client_cpu / took,
                Percentile(lat, 0.5) * 1e3, Percentile(lat, 0.99) * 1e3);
    std::printf("knee (%s): at one step per %.2f s the coordinator falls behind a job of %d ranks\n", name,
                took / std::max(1, got), workers);
    if (got < sent && !watcher.Ended().empty()) {
      std::printf("the WatchJob stream counting the measured steps ended early (%s)\n", watcher.Ended().c_str());
    }
    const std::vector<double> status = probe.Stop();
    std::printf("a status call (ListJobs) during the flood (%s): p50 %.1f ms, p99 %.1f ms (%zu calls); p99 against "
                "before the job (baseline): ratio %.1f\n",
                name, Percentile(status, 0.5) * 1e3, Percentile(status, 0.99) * 1e3, status.size(),
                Percentile(status, 0.99) / std::max(1e-9, Percentile(idle_status, 0.99)));
    return got * workers / took;
  };
  if (flood_s > 0) {
    const double folded = flood("telemetry detail as the job sets it", detail);
    const double whole = flood("every action of every rank (baseline)", every_action);
    std::printf("rank-steps absorbed per second: %.0f with the job's telemetry detail, %.0f with every action (ratio %.2f)\n",
                folded, whole, whole > 0 ? folded / whole : 0.0);
  }

  {  // A job that failed under the load says why (every later figure is then of a dead job).
    grpc::ClientContext ctx;
    v1::GetJobRequest req;
    req.set_job_id(job);
    v1::Job got;
    if (jobs_stub->GetJob(&ctx, req, &got).ok() && got.state() != v1::RUNNING) {
      std::printf("the job is %s: %s\n", v1::JobState_Name(got.state()).c_str(), got.failure_cause().c_str());
    }
  }
  const long metrics_bytes = HttpBodyBytes(coord.http_port, "/metrics");
  std::printf("/metrics: %.2f MiB with the %d-rank job's series\n", metrics_bytes / 1048576.0, workers);
  {
    grpc::ClientContext ctx;
    v1::CancelJobRequest req;
    req.set_job_id(job);
    v1::CancelJobResponse resp;
    (void)jobs_stub->CancelJob(&ctx, req, &resp);
  }
  std::this_thread::sleep_for(std::chrono::seconds(5));
  // Schedule "auto" for a 405B-class model (--auto_deadline_s=0: not tried) (Llama 3 405B's shape) on the fleet: a dry run (the
  // job of 16,384 ranks cancelled first, so every worker is free).
  if (Flag(argc, argv, "auto_deadline_s", 120) > 0) {
    v1::SubmitJobRequest req;
    req.set_dry_run(true);
    *req.mutable_spec() = bench::Auto405BSpec();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(static_cast<int>(Flag(argc, argv, "auto_deadline_s", 120))));
    v1::SubmitJobResponse resp;
    const auto t = Clock::now();
    grpc::Status st = jobs_stub->SubmitJob(&ctx, req, &resp);
    const double took = Since(t);
    if (st.ok()) {
      const v1::JobSpec& c = resp.spec();
      std::printf("schedule auto, 405B-class model (126 layers, h 16384, ffn 53248, 128 heads (no GQA: the CUDA backend does not run it yet), s 8192, global batch 2048) on "
                  "%d free workers (80 GiB each): answered in %.2f s: dp %d x tp %d x pp %d, %s, %d micro-batches of %d\n",
                  workers, took, c.dp(), c.tp(), c.pp(), c.schedule().c_str(), c.microbatches(), c.micro_batch_size());
    } else {
      std::printf("schedule auto, 405B-class model on %d free workers: %s after %.2f s\n", workers,
                  st.error_message().c_str(), took);
    }
  }

  stop = true;
  heart.join();
  int live = 0;
  {
    grpc::ClientContext ctx;
    v1::ListWorkersRequest req;
    v1::ListWorkersResponse resp;
    if (jobs_stub->ListWorkers(&ctx, req, &resp).ok()) live = resp.workers_size();
  }
  int stream_failures = 0;
  int64_t written = 0;
  for (auto& w : writers) {
    stream_failures += w->failed();
    written += w->written();
  }
  std::printf("heartbeats %ld ok, %ld failed, %ld skipped (the previous still out), slowest %.2f s, longest gap between a "
              "worker's beats sent %.2f s; leases lost %d of %d; telemetry batches written %lld, streams failed %d; "
              "coordinator RSS %.0f MiB at the end\n",
              beats.load(), beat_failures.load(), beats_skipped.load(), beat_max.load(), gap_max.load(), workers - live, workers, static_cast<long long>(written), stream_failures,
              RssMiB(coord.pid));
  bool ok = live == workers && beat_failures == 0 && stream_failures == 0;
  for (const Phase& ph : phases) ok &= ph.measured == ph.steps;
  std::printf("%s\n", ok ? "ok" : "MISSED (see above)");
  if (!ok && !watcher.Ended().empty()) std::printf("the WatchJob stream had ended: %s\n", watcher.Ended().c_str());
  watcher.Cancel();
  for (auto& w : writers) w->Finish();
  for (auto& r : readers) r->Cancel();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  kill(coord.pid, SIGTERM);
  waitpid(coord.pid, nullptr, 0);
  coord.pid = -1;
  if (Flag(argc, argv, "keep", 0) > 0) {
    std::printf("the coordinator's log and state file are in %s\n", dir.c_str());
  } else if (std::system(("rm -rf " + dir).c_str()) != 0) {
    std::fprintf(stderr, "could not remove %s\n", dir.c_str());
  }
  // Without tearing down 16,384 reactors one by one: the process ends here.
  std::_Exit(ok ? 0 : 1);
}
