// The worker daemon in-process. Against a real coordinator served over gRPC on loopback: it
// registers, runs jobs to SUCCEEDED and releases them, and a stop or a cancel ends what it is doing
// at once, idle or waiting in a job's Connect, never at a timeout. Against a scripted coordinator
// (FakeCoordinator): fencing after a lease without heartbeat answers, the release retried through a
// coordinator restart, and checkpoints kept from the restart point a heartbeat answer names.
// Nothing here waits by sleeping: each condition is polled with a generous deadline, and what must
// be prompt is bounded far below the timeouts it must not wait for.
#include "worker/daemon/daemon.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <functional>
#include <optional>
#include <thread>

#include "coordinator/loopback_server.h"
#include "jobplan/assignment.h"
#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "jobplan/tiny_spec_for_tests.h"
#include "worker/checkpoint/checkpoint.h"

namespace pipecoord::worker {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Polls `done` every 10 ms until it holds or `limit` passes.
bool WaitFor(const std::function<bool()>& done, Clock::duration limit = seconds(60)) {
  const auto end = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

// True when something accepts TCP connections on 127.0.0.1:`port` (the connection is closed at once).
bool Accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

int PortOf(const std::string& endpoint) { return std::stoi(endpoint.substr(endpoint.rfind(':') + 1)); }

// A coordinator on loopback and one daemon run on its own thread.
class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = coordinator::LoopbackServer::Start({});
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }

  void TearDown() override {
    if (thread_.joinable()) Stop();
    stop_silent_ = true;
    if (silent_heartbeat_.joinable()) silent_heartbeat_.join();
  }

  coordinator::Coordinator& core() { return server_->core(); }

  void StartDaemon(DaemonOptions options = {}) {
    daemon_ = std::make_unique<Daemon>(grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()),
                                       std::move(options), stop_);
    thread_ = std::thread([this] {
      result_ = daemon_->Run();
      returned_ = true;
    });
  }

  // Sets the stop flag and waits for Run to return; how long that took.
  Clock::duration Stop() {
    const auto start = Clock::now();
    stop_ = true;
    thread_.join();
    return Clock::now() - start;
  }

  // The daemon's registration: the one worker that is not the silent peer (none when there are
  // several).
  std::optional<v1::WorkerInfo> DaemonInfo() {
    std::optional<v1::WorkerInfo> found;
    int n = 0;
    for (const v1::WorkerInfo& w : core().ListWorkers()) {
      if (w.worker_id() == silent_id_) continue;
      found = w;
      ++n;
    }
    return n == 1 ? found : std::nullopt;
  }

  bool Registered() { return DaemonInfo().has_value(); }

  // The daemon's worker is free: it holds no job, not even one it is closing.
  bool Free() {
    auto w = DaemonInfo();
    return w.has_value() && w->job_id().empty() && !w->closing();
  }

  v1::JobState State(const std::string& job) { return core().GetJob(job)->state(); }

  static bool Terminal(v1::JobState s) { return s == v1::SUCCEEDED || s == v1::FAILED || s == v1::CANCELLED; }

  // A second worker that registers with the endpoint of a transport that listens but never
  // connects: a pp 2 job on it and the daemon has the daemon wait in Connect for this peer. Its
  // lease is kept by heartbeats from the test.
  void RegisterSilentPeer() {
    auto t = TcpTransport::Listen("127.0.0.1", 0);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    silent_ = std::move(t).value();
    v1::RegisterRequest r;
    r.set_device_kind("cpu");
    r.set_host("127.0.0.1");
    r.set_data_endpoint(silent_->endpoint());
    auto registered = core().Register(r);
    ASSERT_TRUE(registered.ok()) << registered.status().ToString();
    silent_id_ = registered->worker_id();
    silent_heartbeat_ = std::thread([this] {
      while (!stop_silent_) {
        v1::HeartbeatRequest h;
        h.set_worker_id(silent_id_);
        (void)core().Heartbeat(h);
        std::this_thread::sleep_for(milliseconds(100));
      }
    });
  }

  // Submits a pp 2 job for the daemon and the silent peer and waits until the daemon listens on
  // its data port for it: it is in the job's Connect (or just before it), and cannot get further.
  std::string SubmitJobThatWaitsInConnect() {
    auto submitted = core().SubmitJob(jobplan::TinySpec(2));
    EXPECT_TRUE(submitted.ok()) << submitted.status().ToString();
    const std::string job = submitted->job_id();
    EXPECT_TRUE(WaitFor([&] { return DaemonInfo().has_value() && DaemonInfo()->job_id() == job; }))
        << "the job was not assigned to the daemon";
    const int port = PortOf(DaemonInfo()->data_endpoint());
    EXPECT_TRUE(WaitFor([&] { return Accepts(port); })) << "the daemon never listened for the job's peers";
    EXPECT_EQ(State(job), v1::RUNNING);
    return job;
  }

  std::unique_ptr<coordinator::LoopbackServer> server_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<Daemon> daemon_;
  std::thread thread_;
  Status result_;
  std::atomic<bool> returned_{false};
  std::unique_ptr<TcpTransport> silent_;
  std::string silent_id_ = "(none)";
  std::atomic<bool> stop_silent_{false};
  std::thread silent_heartbeat_;
};

// Timeouts a prompt stop must not wait for, and the bound that tells the two apart on a loaded
// machine.
DaemonOptions SlowTimeouts() {
  DaemonOptions o;
  o.connect_timeout = seconds(300);
  o.shutdown_grace = seconds(300);
  return o;
}
constexpr auto kPrompt = seconds(30);

TEST_F(DaemonTest, RegistersRunsJobsToSuccessReleasesThemAndDeregistersOnStop) {
  StartDaemon();
  ASSERT_TRUE(WaitFor([&] { return Registered(); })) << "the daemon did not register";
  const v1::WorkerInfo info = *DaemonInfo();
  EXPECT_EQ(info.device_kind(), "cpu");
  EXPECT_EQ(info.data_endpoint().rfind("127.0.0.1:", 0), 0u) << info.data_endpoint();
  EXPECT_GT(PortOf(info.data_endpoint()), 0);
  EXPECT_FALSE(Accepts(PortOf(info.data_endpoint()))) << "the data port is open between jobs";
  // Two jobs in turn: the second one listens on the same data port again, once the first released it.
  for (int i = 0; i < 2; ++i) {
    auto submitted = core().SubmitJob(jobplan::TinySpec(1));
    ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
    const std::string job = submitted->job_id();
    ASSERT_TRUE(WaitFor([&] { return Terminal(State(job)); })) << job << " did not end";
    const v1::Job done = *core().GetJob(job);
    ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.failure_cause();
    EXPECT_EQ(done.steps_done(), jobplan::TinySpec(1).steps());
    ASSERT_EQ(done.worker_ids_size(), 1);
    EXPECT_EQ(done.worker_ids(0), info.worker_id());
    ASSERT_TRUE(WaitFor([&] { return Free(); })) << "the daemon did not release " << job;
    EXPECT_EQ(DaemonInfo()->data_endpoint(), info.data_endpoint());
  }
  EXPECT_LT(Stop(), kPrompt);
  EXPECT_TRUE(result_.ok()) << result_.ToString();
  EXPECT_TRUE(core().ListWorkers().empty()) << "the daemon did not deregister";
}

TEST_F(DaemonTest, AStopWhileIdleEndsRunAtOnceAndDeregisters) {
  StartDaemon(SlowTimeouts());
  ASSERT_TRUE(WaitFor([&] { return Registered(); })) << "the daemon did not register";
  EXPECT_FALSE(returned_);
  EXPECT_LT(Stop(), kPrompt);
  EXPECT_TRUE(result_.ok()) << result_.ToString();
  EXPECT_TRUE(core().ListWorkers().empty()) << "the daemon did not deregister";
}

// Its peer never connects: a stop ends the wait at once (not at the connect timeout), the daemon
// leaves without a report or a release, and the job, which measured nothing, goes back to the queue.
TEST_F(DaemonTest, AStopWhileConnectingLeavesQuietlyAndTheJobIsQueuedAgain) {
  RegisterSilentPeer();
  StartDaemon(SlowTimeouts());
  ASSERT_TRUE(WaitFor([&] { return Registered(); })) << "the daemon did not register";
  const std::string job = SubmitJobThatWaitsInConnect();
  ASSERT_FALSE(HasFailure());
  EXPECT_LT(Stop(), kPrompt);
  EXPECT_TRUE(result_.ok()) << result_.ToString();
  const v1::Job queued = *core().GetJob(job);
  EXPECT_EQ(queued.state(), v1::PENDING) << queued.failure_cause();
  EXPECT_EQ(queued.restarts(), 0);
  ASSERT_GT(queued.events_size(), 0);
  EXPECT_EQ(queued.events(queued.events_size() - 1).message().rfind("back in the queue (worker ", 0), 0u)
      << queued.events(queued.events_size() - 1).message();
  const auto workers = core().ListWorkers();
  ASSERT_EQ(workers.size(), 1u) << "the daemon did not deregister";
  EXPECT_EQ(workers[0].worker_id(), silent_id_);
}

// The coordinator cancels the job while the daemon waits in its Connect: the wait ends at once,
// the daemon reports and releases the job and is free for the next one, still serving.
TEST_F(DaemonTest, ACancelWhileConnectingEndsTheWaitAndTheWorkerIsFreedOnRelease) {
  RegisterSilentPeer();
  StartDaemon(SlowTimeouts());
  ASSERT_TRUE(WaitFor([&] { return Registered(); })) << "the daemon did not register";
  const std::string job = SubmitJobThatWaitsInConnect();
  ASSERT_FALSE(HasFailure());
  const auto cancelled = core().CancelJob(job);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().ToString();
  EXPECT_EQ(*cancelled, v1::CANCELLED);
  const auto start = Clock::now();
  ASSERT_TRUE(WaitFor([&] { return Free(); }, kPrompt)) << "the daemon did not release the cancelled job";
  EXPECT_LT(Clock::now() - start, kPrompt);
  EXPECT_FALSE(Accepts(PortOf(DaemonInfo()->data_endpoint()))) << "the job's listener is still open";
  EXPECT_FALSE(returned_);
  EXPECT_EQ(State(job), v1::CANCELLED);
  EXPECT_EQ(core().GetJob(job)->failure_cause(), "");
  EXPECT_LT(Stop(), kPrompt);
  EXPECT_TRUE(result_.ok()) << result_.ToString();
}


// A coordinator the test scripts: it assigns what the test gives it, records what the daemon
// says, and can stop answering heartbeats, answer a restart point, or act as a coordinator that
// restarted (it knows no worker until one registers again).
class FakeCoordinator final : public v1::WorkerService::Service {
 public:
  explicit FakeCoordinator(int64_t lease_ms) : lease_ms_(lease_ms) {}

  void Assign(const v1::Assignment& a) { Push([&](v1::WorkerCommand& c) { *c.mutable_assign() = a; }); }
  void Cancel(const std::string& job) { Push([&](v1::WorkerCommand& c) { c.set_cancel_job_id(job); }); }
  // Heartbeats answer UNAVAILABLE from now on (until AnswerHeartbeats).
  void FailHeartbeats() { heartbeats_fail_ = true; }
  void AnswerHeartbeats() { heartbeats_fail_ = false; }
  // After Restart(false): Register answers at once (a worker need not release first).
  void AllowRegistration() {
    std::lock_guard<std::mutex> lock(mu_);
    refused_release_ = true;
  }
  // Heartbeats sent while a job runs are answered with that job and this restart point.
  void AnswerCheckpointedSteps(int steps) { checkpointed_steps_ = steps; }
  // Forgets the worker, as a coordinator that restarted: Commands, Heartbeat and ReleaseJob answer
  // NOT_FOUND until it registers again; and, so a release meets NOT_FOUND first, Register answers
  // UNAVAILABLE until a release was refused.
  // With `adopt`, Register answers at once and takes the held job back (held_job_adopted).
  void Restart(bool adopt = false) {
    std::lock_guard<std::mutex> lock(mu_);
    known_ = false;
    refused_release_ = false;
    adopt_ = adopt;
  }
  void Shutdown() {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    changed_.notify_all();
  }

  struct Seen {
    std::vector<v1::RegisterRequest> registers;
    std::vector<v1::HeartbeatRequest> heartbeats;  // answered ones
    std::vector<v1::ReportResultRequest> reports;
    std::vector<std::pair<v1::ReleaseJobRequest, bool>> releases;  // and whether it was heard
    int last_step = -1;                                             // newest step in telemetry
    int deregisters = 0;
  };
  Seen seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest* req, v1::RegisterResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!known_ && !refused_release_ && !adopt_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "starting");
    seen_.registers.push_back(*req);
    known_ = true;
    resp->set_worker_id("worker-0001");
    resp->set_lease_ms(lease_ms_);
    resp->set_held_job_adopted(adopt_ && !req->held_job_id().empty());
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* req, v1::HeartbeatResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (heartbeats_fail_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "not answering");
    if (!known_) return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown worker");
    seen_.heartbeats.push_back(*req);
    resp->set_lease_ms(lease_ms_);
    if (req->has_progress() && checkpointed_steps_ > 0) {
      resp->set_job_id(req->progress().job_id());
      resp->set_checkpointed_steps(checkpointed_steps_);
    }
    return grpc::Status::OK;
  }

  grpc::Status Commands(grpc::ServerContext* ctx, const v1::CommandsRequest*,
                        grpc::ServerWriter<v1::WorkerCommand>* writer) override {
    std::unique_lock<std::mutex> lock(mu_);
    while (!ctx->IsCancelled() && !shutdown_) {
      if (!known_) return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown worker");
      if (commands_.empty()) {
        changed_.wait_for(lock, milliseconds(20));
        continue;
      }
      v1::WorkerCommand cmd = commands_.front();
      commands_.pop_front();
      lock.unlock();
      const bool written = writer->Write(cmd);
      lock.lock();
      if (!written) {
        commands_.push_front(cmd);
        break;
      }
    }
    return grpc::Status::CANCELLED;
  }

  grpc::Status ReportResult(grpc::ServerContext*, const v1::ReportResultRequest* req, v1::ReportResultResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    seen_.reports.push_back(*req);
    return grpc::Status::OK;
  }

  grpc::Status ReleaseJob(grpc::ServerContext*, const v1::ReleaseJobRequest* req, v1::ReleaseJobResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    seen_.releases.emplace_back(*req, known_);
    if (!known_) {
      refused_release_ = true;
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown worker");
    }
    return grpc::Status::OK;
  }

  grpc::Status Telemetry(grpc::ServerContext*, grpc::ServerReader<v1::TelemetryBatch>* reader, v1::TelemetryAck*) override {
    v1::TelemetryBatch batch;
    while (reader->Read(&batch)) {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& s : batch.steps()) seen_.last_step = std::max(seen_.last_step, static_cast<int>(s.step()));
    }
    return grpc::Status::OK;
  }

  grpc::Status Deregister(grpc::ServerContext*, const v1::DeregisterRequest*, v1::DeregisterResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++seen_.deregisters;
    return grpc::Status::OK;
  }

 private:
  void Push(const std::function<void(v1::WorkerCommand&)>& fill) {
    v1::WorkerCommand cmd;
    fill(cmd);
    std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back(std::move(cmd));
    changed_.notify_all();
  }

  const int64_t lease_ms_;
  std::atomic<bool> heartbeats_fail_{false};
  std::atomic<int> checkpointed_steps_{0};
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<v1::WorkerCommand> commands_;
  bool known_ = true, refused_release_ = false, shutdown_ = false, adopt_ = false;
  Seen seen_;
};

// The daemon against a FakeCoordinator served on loopback.
class ScriptedCoordinatorTest : public ::testing::Test {
 protected:
  // Long enough that a loaded machine's late heartbeat answer is not taken for silence.
  static constexpr int64_t kLeaseMs = 2000;

  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_ != nullptr && port > 0);
    address_ = "127.0.0.1:" + std::to_string(port);
  }

  // Starts the daemon (checkpoints in the test's folder) and waits for its registration.
  void StartDaemon(DaemonOptions options = SlowTimeouts()) {
    options.checkpoint_dir = checkpoint_dir_;
    daemon_ = std::make_unique<Daemon>(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()),
                                       std::move(options), stop_);
    thread_ = std::thread([this] { result_ = daemon_->Run(); });
    ASSERT_TRUE(WaitFor([&] { return !fake_.seen().registers.empty(); })) << "the daemon did not register";
    endpoint_ = fake_.seen().registers[0].data_endpoint();
  }

  void TearDown() override {
    if (thread_.joinable()) Stop();
    fake_.Shutdown();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + seconds(1));
  }

  Clock::duration Stop() {
    const auto start = Clock::now();
    stop_ = true;
    thread_.join();
    return Clock::now() - start;
  }

  // A pp 1 job of `steps` steps on the daemon, as the coordinator would assign it.
  v1::Assignment Job(const std::string& id, int steps, int checkpoint_every = 0) {
    v1::JobSpec spec = jobplan::TinySpec(1);
    spec.set_steps(steps);
    spec.set_checkpoint_every(checkpoint_every);
    spec = jobplan::WithDefaults(spec);
    auto plan = jobplan::PlanJob(spec);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    return jobplan::BuildAssignment(id, spec, *plan, 0, {endpoint_}, 7);
  }

  bool Released(const std::string& job) {
    for (const auto& [r, heard] : fake_.seen().releases) {
      if (r.job_id() == job && heard) return true;
    }
    return false;
  }

  FakeCoordinator fake_{kLeaseMs};
  const std::string checkpoint_dir_ =
      std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/daemon_test_checkpoints";
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<Daemon> daemon_;
  std::thread thread_;
  Status result_;
  std::string endpoint_;
};

// With no coordinator answering for the whole grace (here one lease), the daemon stops its job,
// says why, and still releases it.
DaemonOptions GraceOfALease() {
  DaemonOptions o = SlowTimeouts();
  o.coordinator_grace = milliseconds(2000);
  return o;
}

TEST_F(ScriptedCoordinatorTest, AJobIsStoppedOnceNoCoordinatorAnsweredForTheGrace) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(GraceOfALease()));
  const v1::Assignment a = Job("job-fenced", 10'000'000);
  fake_.Assign(a);
  ASSERT_TRUE(WaitFor([&] { return fake_.seen().last_step >= 1; })) << "the job did not run";
  // Answered heartbeats while it ran did not stop it.
  EXPECT_TRUE(fake_.seen().reports.empty());
  fake_.FailHeartbeats();
  ASSERT_TRUE(WaitFor([&] { return !fake_.seen().reports.empty(); })) << "the job was not stopped";
  const v1::ReportResultRequest report = fake_.seen().reports[0];
  EXPECT_FALSE(report.ok());
  EXPECT_EQ(report.message(), "stopped: no answer from the coordinator for 2000 ms");
  EXPECT_EQ(report.session(), a.session());
  ASSERT_TRUE(WaitFor([&] { return Released(a.job_id()); })) << "the fenced job was not released";
  EXPECT_LT(Stop(), kPrompt);
  EXPECT_TRUE(result_.ok()) << result_.ToString();
}

// A coordinator that restarted does not know the worker: its heartbeats go unanswered (NOT_FOUND),
// and this one answers no registration for the grace, so the job stops; the release meets
// NOT_FOUND and is retried until the command loop has registered again, naming the job still
// held; then it is heard.
TEST_F(ScriptedCoordinatorTest, TheReleaseIsRetriedThroughACoordinatorRestart) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(GraceOfALease()));
  const v1::Assignment a = Job("job-held", 10'000'000);
  fake_.Assign(a);
  ASSERT_TRUE(WaitFor([&] { return fake_.seen().last_step >= 1; })) << "the job did not run";
  fake_.Restart();
  ASSERT_TRUE(WaitFor([&] { return Released(a.job_id()); })) << "the release was never heard";
  const FakeCoordinator::Seen seen = fake_.seen();
  ASSERT_EQ(seen.reports.size(), 1u);
  EXPECT_EQ(seen.reports[0].message(), "stopped: no answer from the coordinator for 2000 ms");
  ASSERT_GE(seen.releases.size(), 2u);
  EXPECT_FALSE(seen.releases.front().second);
  ASSERT_EQ(seen.registers.size(), 2u);
  EXPECT_EQ(seen.registers[1].worker_id(), "worker-0001");
  EXPECT_EQ(seen.registers[1].held_job_id(), a.job_id());
  EXPECT_EQ(seen.registers[1].held_session(), a.session());
  EXPECT_LT(Stop(), kPrompt);
  EXPECT_TRUE(result_.ok()) << result_.ToString();
  EXPECT_EQ(fake_.seen().deregisters, 1);
}

// A coordinator that restarted and takes the job back (held_job_adopted): the job never stopped,
// however long the coordinator was away (here over the default lease of the old rule), and runs
// on after the worker registered again naming it.
TEST_F(ScriptedCoordinatorTest, ACoordinatorRestartThatAdoptsTheJobDoesNotStopIt) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  const v1::Assignment a = Job("job-adopted", 10'000'000);
  fake_.Assign(a);
  ASSERT_TRUE(WaitFor([&] { return fake_.seen().last_step >= 1; })) << "the job did not run";
  fake_.FailHeartbeats();
  std::this_thread::sleep_for(milliseconds(3 * kLeaseMs));  // the old rule stopped the job after one lease
  fake_.Restart(/*adopt=*/true);
  fake_.AnswerHeartbeats();
  ASSERT_TRUE(WaitFor([&] { return fake_.seen().registers.size() >= 2; })) << "no registration after the restart";
  const int at_register = fake_.seen().last_step;
  ASSERT_TRUE(WaitFor([&] { return fake_.seen().last_step >= at_register + 3; })) << "the job did not go on";
  const FakeCoordinator::Seen seen = fake_.seen();
  EXPECT_TRUE(seen.reports.empty()) << seen.reports[0].message();
  EXPECT_EQ(seen.registers[1].held_job_id(), a.job_id());
  EXPECT_EQ(seen.registers[1].held_session(), a.session());
  fake_.Cancel(a.job_id());
  ASSERT_TRUE(WaitFor([&] { return Released(a.job_id()); })) << "the cancelled job was not released";
  EXPECT_LT(Stop(), kPrompt);
  EXPECT_TRUE(result_.ok()) << result_.ToString();
}

// A coordinator that restarted and does not take the job back (it failed or restarted it while
// the worker was away): the worker stops the job as soon as it registers again.
TEST_F(ScriptedCoordinatorTest, ACoordinatorRestartThatDoesNotAdoptTheJobStopsIt) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  const v1::Assignment a = Job("job-orphaned", 10'000'000);
  fake_.Assign(a);
  ASSERT_TRUE(WaitFor([&] { return fake_.seen().last_step >= 1; })) << "the job did not run";
  fake_.Restart(/*adopt=*/false);
  fake_.AllowRegistration();
  ASSERT_TRUE(WaitFor([&] { return !fake_.seen().reports.empty(); })) << "the job was not stopped";
  EXPECT_EQ(fake_.seen().reports[0].message(), "stopped: the coordinator no longer runs the job on this worker");
  ASSERT_TRUE(WaitFor([&] { return Released(a.job_id()); })) << "the stopped job was not released";
  EXPECT_LT(Stop(), kPrompt);
  EXPECT_TRUE(result_.ok()) << result_.ToString();
}

// The heartbeat's answer names the held job's restart point (steps [0, 3) checkpointed on every
// rank: a restart resumes from step 2's files): every file from there on stays, the older ones go.
TEST_F(ScriptedCoordinatorTest, CheckpointsFromTheRestartPointAHeartbeatAnswerNamesAreKept) {
  // Slowed down (each compute action takes 200 times as long), so the steps, each one saved,
  // do not fill the disk while heartbeats go back and forth; the checks below rely on order, not
  // on speed.
  DaemonOptions options = SlowTimeouts();
  auto slow = ParseFaultRules("slow:0:200");
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  options.faults = *slow;
  ASSERT_NO_FATAL_FAILURE(StartDaemon(options));
  const v1::Assignment a = Job("job-ckpt", 10'000'000, /*checkpoint_every=*/1);
  fake_.AnswerCheckpointedSteps(3);
  fake_.Assign(a);
  // A heartbeat sent while the job ran was answered with the restart point; the daemon's next
  // heartbeat, sent once that answer was taken in, says which step the job was in then: its
  // checkpoint, and every later one, is written knowing the restart point.
  int known_at = -1;
  ASSERT_TRUE(WaitFor([&] {
    int with_progress = 0;
    for (const v1::HeartbeatRequest& h : fake_.seen().heartbeats) {
      if (h.has_progress() && ++with_progress == 2) known_at = h.progress().step();
    }
    return known_at >= 0;
  })) << "no heartbeat while the job ran";
  const int written = std::max(known_at, 3);
  ASSERT_TRUE(WaitFor([&] { return fake_.seen().last_step >= written; })) << "the job did not reach step " << written;
  fake_.Cancel(a.job_id());
  ASSERT_TRUE(WaitFor([&] { return Released(a.job_id()); })) << "the cancelled job was not released";
  const int last = fake_.seen().last_step;
  auto exists = [&](int step) { return std::filesystem::exists(CheckpointPath(checkpoint_dir_, a.job_id(), 0, step)); };
  EXPECT_FALSE(exists(0));
  EXPECT_FALSE(exists(1));
  for (int step = 2; step <= last; ++step) EXPECT_TRUE(exists(step)) << "step " << step << " of " << last;
  EXPECT_LT(Stop(), kPrompt);
  EXPECT_TRUE(result_.ok()) << result_.ToString();
}

}  // namespace
}  // namespace pipecoord::worker
