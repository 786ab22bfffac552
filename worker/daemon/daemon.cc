#include "worker/daemon/daemon.h"

#include <condition_variable>
#include <cstdio>

#include "jobplan/layout.h"
#include "jobplan/recovery.h"
#include "jobplan/telemetry_detail.h"
#include "worker/daemon/coordinator_rendezvous.h"
#include "worker/daemon/rank_run.h"
#include "worker/transport/endpoint.h"

namespace pipecoord::worker {
namespace {

// How often the stop flag is looked at, and the pauses between retries.
constexpr std::chrono::milliseconds kStopPoll{50};
constexpr std::chrono::milliseconds kCommandsRetry{200};
constexpr std::chrono::milliseconds kRegisterRetry{500};
constexpr std::chrono::milliseconds kReleaseRetry{250};
// How long a rank that stopped for an in-place recovery waits for the coordinator's resume (it
// comes within the coordinator's recovery deadline, or a cancel does).
constexpr std::chrono::milliseconds kRecoveryWait{60000};

// A coordinator's answer that retrying would not change (bad input, credentials, a rank not held).
bool RefusedForGood(grpc::StatusCode code) {
  return code == grpc::StatusCode::PERMISSION_DENIED || code == grpc::StatusCode::UNAUTHENTICATED ||
         code == grpc::StatusCode::INVALID_ARGUMENT;
}

int64_t WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

void Log(const char* fmt, const std::string& a = "", const std::string& b = "") {
  std::fprintf(stderr, "worker: ");
  std::fprintf(stderr, fmt, a.c_str(), b.c_str());
  std::fprintf(stderr, "\n");
}

// Heartbeats on the coordinator's KeepAlive stream: one request and its answer at a time, each
// within `timeout` (past it the stream is cancelled, and the next beat opens a new one). A
// coordinator without KeepAlive (UNIMPLEMENTED: an older one) is sent unary Heartbeat calls from
// then on. Used by one thread.
class KeepAliveClient {
 public:
  explicit KeepAliveClient(v1::WorkerService::Stub* stub) : stub_(stub) {}
  ~KeepAliveClient() { Close(); }
  KeepAliveClient(const KeepAliveClient&) = delete;
  KeepAliveClient& operator=(const KeepAliveClient&) = delete;

  grpc::Status Beat(const v1::HeartbeatRequest& req, v1::HeartbeatResponse* resp, std::chrono::milliseconds timeout) {
    if (unary_) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + timeout);
      return stub_->Heartbeat(&ctx, req, resp);
    }
    if (stream_ == nullptr) {
      ctx_ = std::make_unique<grpc::ClientContext>();
      stream_ = stub_->KeepAlive(ctx_.get());
    }
    // A stream has no per-message deadline: a watchdog cancels it when the answer is late.
    std::mutex mu;
    std::condition_variable cv;
    bool answered = false;
    std::thread watchdog([&] {
      std::unique_lock<std::mutex> lock(mu);
      if (!cv.wait_for(lock, timeout, [&] { return answered; })) ctx_->TryCancel();
    });
    const bool ok = stream_->Write(req) && stream_->Read(resp);
    {
      std::lock_guard<std::mutex> lock(mu);
      answered = true;
    }
    cv.notify_one();
    watchdog.join();
    if (ok) return grpc::Status::OK;
    // A failed write or read means the call is over (or the watchdog cancelled it): its status
    // is there to take, UNIMPLEMENTED from a coordinator without the stream.
    grpc::Status st = stream_->Finish();
    stream_.reset();
    ctx_.reset();
    if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      unary_ = true;
      return Beat(req, resp, timeout);
    }
    return st.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "the heartbeat stream ended") : st;
  }

 private:
  void Close() {
    if (stream_ == nullptr) return;
    ctx_->TryCancel();
    (void)stream_->Finish();
    stream_.reset();
    ctx_.reset();
  }

  v1::WorkerService::Stub* const stub_;
  bool unary_ = false;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::HeartbeatRequest, v1::HeartbeatResponse>> stream_;
};

}  // namespace

Daemon::Daemon(std::shared_ptr<grpc::Channel> channel, DaemonOptions options, const std::atomic<bool>& stop)
    : stub_(v1::WorkerService::NewStub(channel)), options_(std::move(options)), stop_(stop),
      data_port_(options_.data_port) {}

Daemon::~Daemon() {
  if (job_thread_.joinable()) job_thread_.join();
}

Status Daemon::Run() {
  // The data port is chosen and held once (PortReservation), so the endpoint the coordinator
  // hands to peers stays true and no other process on this host is given the port meanwhile.
  auto held = PortReservation::Bind(options_.data_host, data_port_);
  if (!held.ok()) return Unavailable("cannot listen for peers: " + held.status().message());
  data_port_ = held->port();
  endpoint_ = FormatHostPort(options_.data_host, data_port_);
  if (!options_.advertise.empty()) {
    endpoint_ = FormatHostPort(options_.advertise, data_port_);
  } else if (options_.data_host == "0.0.0.0" || options_.data_host == "::") {
    Log("listening on %s without --advertise: peers on other hosts cannot reach it", endpoint_);
  }
  {
    std::lock_guard<std::mutex> lock(port_mu_);
    port_held_ = std::move(held).value();  // kept until a job listens there
  }
  PIPECOORD_RETURN_IF_ERROR(RegisterWithRetry());
  std::thread heartbeat([this] { HeartbeatLoop(); });
  std::thread stopper([this] { StopWatch(); });
  while (!stop_) {
    grpc::ClientContext ctx;
    {
      std::lock_guard<std::mutex> lock(mu_);
      commands_ctx_ = &ctx;
    }
    v1::CommandsRequest req;
    req.set_worker_id(WorkerId());
    auto reader = stub_->Commands(&ctx, req);
    v1::WorkerCommand cmd;
    while (!stop_ && reader->Read(&cmd)) Handle(cmd);
    grpc::Status st = reader->Finish();
    {
      std::lock_guard<std::mutex> lock(mu_);
      commands_ctx_ = nullptr;
    }
    if (stop_) break;
    if (st.error_code() == grpc::StatusCode::NOT_FOUND) RegisterWithRetry();  // lease lost
    std::this_thread::sleep_for(kCommandsRetry);
  }
  // A job started just before the stop was seen is told too, once StopWatch's drain was answered
  // (its Drain call has a 5 s deadline).
  for (int i = 0; i < 400 && !stop_told_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (std::shared_ptr<HeldJob> job = Held(); job != nullptr) job->StopGracefully();
  const auto grace_end = std::chrono::steady_clock::now() + options_.shutdown_grace;
  while (Held() != nullptr && std::chrono::steady_clock::now() < grace_end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (std::shared_ptr<HeldJob> job = Held(); job != nullptr) {
    job->Cancel("the worker's shutdown grace period ran out");
    std::lock_guard<std::mutex> lock(mu_);
    if (outbox_ != nullptr) outbox_->Abandon();  // no coordinator took the rest: stop waiting for one
  }
  if (job_thread_.joinable()) job_thread_.join();
  draining_ = false;
  stopper.join();
  heartbeat.join();
  Deregister();
  return Status::Ok();
}

// A signal cannot cancel an RPC or stop a job itself; this thread does both at once, so a stop is
// honoured in every state: idle, setting up, connecting, running.
void Daemon::StopWatch() {
  while (!stop_) std::this_thread::sleep_for(kStopPoll);
  std::shared_ptr<HeldJob> job;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (commands_ctx_ != nullptr) commands_ctx_->TryCancel();
    job = held_;
  }
  if (job != nullptr && job->running()) {
    // Every rank of the job stops after the same step and checkpoints it, so the next attempt
    // resumes there; without the coordinator's answer, this rank finishes its current step.
    const v1::Assignment& a = job->assignment();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::DrainRequest req;
    req.set_worker_id(WorkerId());
    req.set_job_id(a.job_id());
    req.set_session(a.session());
    v1::DrainResponse resp;
    if (stub_->Drain(&ctx, req, &resp).ok() && resp.stop_after_step() >= 0) {
      job->StopAfter(resp.stop_after_step());
      Log("shutting down: every rank of %s stops after step %s and checkpoints it", a.job_id(),
          std::to_string(resp.stop_after_step()));
      stop_told_ = true;
      return;
    }
  }
  if (job != nullptr) {
    Log(job->StopGracefully() ? "shutting down: finishing the current step of %s"
                              : "shutting down: leaving %s before it started (it goes back to the queue)",
        job->assignment().job_id());
  }
  stop_told_ = true;
}

std::string Daemon::WorkerId() {
  std::lock_guard<std::mutex> lock(mu_);
  return worker_id_;
}

std::shared_ptr<HeldJob> Daemon::Held() {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

Status Daemon::RegisterWithRetry() {
  for (int attempt = 0; !stop_; ++attempt) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::RegisterRequest req;
    req.set_device_kind(options_.device);
    req.set_device_memory_bytes(options_.memory_bytes);
    req.set_host(options_.advertise.empty() ? options_.data_host : options_.advertise);
    req.set_data_endpoint(endpoint_);
    req.set_worker_id(WorkerId());
    if (std::shared_ptr<HeldJob> job = Held(); job != nullptr) {
      // Still closing a job: the coordinator keeps this worker busy until it is released.
      req.set_held_job_id(job->assignment().job_id());
      req.set_held_session(job->assignment().session());
    }
    v1::RegisterResponse resp;
    grpc::Status st = stub_->Register(&ctx, req, &resp);
    if (st.ok() && !CurrentEpoch(resp.epoch())) {
      Log("a coordinator of an older epoch (%s) answered the registration: ignored", std::to_string(resp.epoch()));
      std::this_thread::sleep_for(kRegisterRetry);
      continue;
    }
    if (st.ok()) {
      std::shared_ptr<HeldJob> job;
      {
        std::lock_guard<std::mutex> lock(mu_);
        worker_id_ = resp.worker_id();
        lease_ms_ = resp.lease_ms();
        job = held_;
      }
      Log("registered as %s, peers reach it at %s", resp.worker_id(), endpoint_);
      if (job != nullptr && req.held_job_id() == job->assignment().job_id()) {
        if (resp.held_job_adopted()) {
          Log("%s: the coordinator took the job back; it goes on", req.held_job_id());
        } else if (!job->cancelled() && !job->releasing()) {
          // Ended or restarted elsewhere while this worker could not hear about it.
          Log("%s: the coordinator no longer runs it on this worker: stopping it", req.held_job_id());
          job->Cancel("the coordinator no longer runs the job on this worker");
        }
      }
      return Status::Ok();
    }
    // Bad input or credentials do not get better by retrying (a live registration of the same
    // certificate, FAILED_PRECONDITION, does once its lease expires).
    switch (st.error_code()) {
      case grpc::StatusCode::INVALID_ARGUMENT:
        return InvalidArgument("registration refused: " + st.error_message());
      case grpc::StatusCode::UNAUTHENTICATED:
        return Status(Code::kUnauthenticated, "registration refused: " + st.error_message());
      case grpc::StatusCode::PERMISSION_DENIED:
        return Status(Code::kPermissionDenied, "registration refused: " + st.error_message());
      default:
        break;
    }
    // Something answers, but not in gRPC (HTTP/1: e.g. the coordinator's --http port): a wrong
    // address, which waiting will not fix.
    if (WorkerId().empty() && st.error_message().find("Failed parsing HTTP/2") != std::string::npos) {
      return InvalidArgument("the coordinator address answers HTTP/1, not gRPC (the coordinator's --http port?): "
                             "give its gRPC --listen address (" + st.error_message() + ")");
    }
    if (attempt % 10 == 0) Log("coordinator not reachable yet (%s), retrying", st.error_message());
    std::this_thread::sleep_for(kRegisterRetry);
  }
  return Unavailable("stopped before the coordinator answered a registration");
}

bool Daemon::CurrentEpoch(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (epoch < max_epoch_) return false;
  max_epoch_ = epoch;
  return true;
}

void Daemon::HeartbeatLoop() {
  KeepAliveClient keep_alive(stub_.get());
  auto last_heard = std::chrono::steady_clock::now();
  while (!stop_ || draining_) {
    int64_t lease;
    {
      std::lock_guard<std::mutex> lock(mu_);
      lease = lease_ms_;
    }
    v1::HeartbeatRequest req;
    req.set_worker_id(WorkerId());
    const int64_t t0 = WallNs();
    req.set_worker_send_ns(t0);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (hooks_ != nullptr) *req.mutable_progress() = hooks_->progress();
    }
    v1::HeartbeatResponse resp;
    if (keep_alive.Beat(req, &resp, std::chrono::milliseconds(lease)).ok() && CurrentEpoch(resp.epoch())) {
      clock_.AddSample(t0, resp.coordinator_recv_ns(), resp.coordinator_send_ns(), WallNs());
      last_heard = std::chrono::steady_clock::now();
      std::lock_guard<std::mutex> lock(mu_);
      if (resp.lease_ms() > 0) lease_ms_ = resp.lease_ms();  // the lease grows with the fleet
      const bool held = held_ != nullptr && resp.job_id() == held_->assignment().job_id();
      if (checkpoints_ != nullptr && held && resp.checkpointed_steps() > 0) {
        checkpoints_->KeepFrom(resp.checkpointed_steps() - 1);  // the coordinator's restart point
      }
      if (outbox_ != nullptr && held && resp.next_telemetry_step() > 0) outbox_->Confirm(resp.next_telemetry_step());
    } else if (std::chrono::steady_clock::now() - last_heard > options_.coordinator_grace) {
      // No coordinator for the whole grace: none is coming back to read this job's telemetry or
      // to tell it to stop (a lost lease is told at the next registration, and peers' failures
      // reach the job through its data plane, so this is the last resort).
      if (std::shared_ptr<HeldJob> job = Held(); job != nullptr && !job->cancelled() && !job->releasing()) {
        const std::string grace = std::to_string(options_.coordinator_grace.count()) + " ms";
        Log("%s: no answer from the coordinator for %s: stopping the job", job->assignment().job_id(), grace);
        job->Cancel("no answer from the coordinator for " + grace);
      }
    }
    for (int i = 0; i < 10 && (!stop_ || draining_); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(lease / 30));
  }
}

void Daemon::Handle(const v1::WorkerCommand& cmd) {
  if (!CurrentEpoch(cmd.epoch())) {
    Log("a command of an older coordinator epoch (%s) was ignored", std::to_string(cmd.epoch()));
    return;
  }
  if (cmd.has_assign()) {
    if (stop_) {
      Log("%s: not started, the worker is shutting down", cmd.assign().job_id());
      return;
    }
    if (std::shared_ptr<HeldJob> old = Held(); old != nullptr && !old->releasing()) {
      // The coordinator frees a worker only once it released its job; reaching here means it
      // lost track (e.g. it restarted). The newer assignment wins.
      Log("%s: assigned while %s is still held: stopping that one first", cmd.assign().job_id(),
          old->assignment().job_id());
      old->Cancel("superseded by " + cmd.assign().job_id());
    }
    if (job_thread_.joinable()) job_thread_.join();
    auto job = std::make_shared<HeldJob>(cmd.assign());
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_ = job;
    }
    job_thread_ = std::thread([this, job] { HoldJob(job); });
  } else if (cmd.has_stop_after()) {
    std::shared_ptr<HeldJob> job = Held();
    const v1::StopAfterStep& s = cmd.stop_after();
    if (job != nullptr && job->assignment().job_id() == s.job_id() && job->assignment().session() == s.session()) {
      Log("%s: the coordinator stops every rank after step %s (a graceful stop)", s.job_id(), std::to_string(s.step()));
      job->StopAfter(s.step());
    }
  } else if (cmd.has_halt()) {
    std::shared_ptr<HeldJob> job = Held();
    const v1::Halt& h = cmd.halt();
    if (job != nullptr && job->assignment().job_id() == h.job_id() && job->assignment().session() == h.session()) {
      if (h.at_step_end()) {
        Log("%s: the coordinator stops every rank after step %s to change the job's plan in place", h.job_id(),
            std::to_string(h.step()));
        job->Halt(h.step());
      } else {
        Log("%s: halted by the coordinator: a rank of the job is lost, this one keeps its state for the recovery", h.job_id());
        job->Halt();
      }
    }
  } else if (cmd.has_recover()) {
    std::shared_ptr<HeldJob> job = Held();
    const v1::ResumeInPlace& r = cmd.recover();
    if (job != nullptr && job->assignment().job_id() == r.job_id() && job->assignment().session() == r.session()) {
      job->Recover(r);
    }
  } else if (!cmd.cancel_job_id().empty()) {
    std::shared_ptr<HeldJob> job = Held();
    if (job != nullptr && job->assignment().job_id() == cmd.cancel_job_id()) {
      Log("%s: cancelled by the coordinator", cmd.cancel_job_id());
      job->Cancel("cancelled by the coordinator");
    }
  }
}

void Daemon::Deregister() {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::DeregisterRequest req;
  req.set_worker_id(WorkerId());
  v1::DeregisterResponse resp;
  grpc::Status st = stub_->Deregister(&ctx, req, &resp);
  if (st.ok()) Log("deregistered %s", WorkerId());
}

void Daemon::HoldJob(const std::shared_ptr<HeldJob>& job) {
  const v1::Assignment& a = job->assignment();
  Log("%s: running %s", a.job_id(), jobplan::LayoutOf(a.spec()).Name(RankRun::GlobalRank(a)).c_str());
  RunJob(*job);
  {
    // Every link of the job is closed: hold the data port again until the next job (before the
    // release, after which the coordinator may hand this worker another). A job that failed
    // before it listened never gave it up.
    std::lock_guard<std::mutex> lock(port_mu_);
    if (!port_held_) {
      auto held = PortReservation::Bind(options_.data_host, data_port_);
      if (held.ok()) {
        port_held_ = std::move(held).value();
      } else {
        Log("%s: could not hold the data port again: %s", a.job_id(), held.status().message());
      }
    }
  }
  job->MarkReleasing();
  if (!job->quiet()) Release(a);
  std::lock_guard<std::mutex> lock(mu_);
  if (held_ == job) held_.reset();
}

// Tells the coordinator every link of the job is closed, so it may hand this worker the next
// one; retried until it is heard. NOT_FOUND (a coordinator that restarted does not know this
// worker yet) is retried too: the command loop registers again, naming this hold, and the
// coordinator keeps the worker busy until this release arrives.
void Daemon::Release(const v1::Assignment& a) {
  for (int attempt = 0; !stop_; ++attempt) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ReleaseJobRequest req;
    req.set_worker_id(WorkerId());
    req.set_job_id(a.job_id());
    req.set_session(a.session());
    v1::ReleaseJobResponse resp;
    grpc::Status st = stub_->ReleaseJob(&ctx, req, &resp);
    const auto code = st.error_code();
    if (st.ok() || RefusedForGood(code)) {
      return;  // heard (or refused for good: retrying would not change it)
    }
    if (attempt % 20 == 0) Log("%s: release not heard yet (%s), retrying", a.job_id(), st.error_message());
    std::this_thread::sleep_for(kReleaseRetry);
  }
}

// Tells the coordinator how this rank's part ended; on failure, with the peers whose links
// broke or never came up (from `transport`, when there is one), so the coordinator can find the
// root cause rather than blame this rank.
void Daemon::Report(const v1::Assignment& a, const Status& st, const TcpTransport* transport,
                    const v1::CommitState* awaiting) {
  v1::ReportResultRequest req;
  if (awaiting != nullptr) {
    req.set_awaiting_recovery(true);
    *req.mutable_commit() = *awaiting;
  }
  req.set_worker_id(WorkerId());
  req.set_job_id(a.job_id());
  req.set_rank(a.rank());
  req.set_ok(st.ok());
  req.set_message(st.message());
  req.set_session(a.session());
  if (!st.ok() && transport != nullptr) {
    for (int g : transport->BrokenPeers()) req.add_unreachable_peers(g);
    for (int g : transport->UnconnectedPeers()) req.add_unreachable_peers(g);
  }
  Log("%s: %s", a.job_id(), st.ok() ? std::string("done")
                                     : st.ToString() + (awaiting != nullptr ? " (waiting to recover in place)" : ""));
  // Retried while no coordinator answers (one may be restarting), up to the grace: the result
  // is what the coordinator waits for to end the job.
  const auto give_up = std::chrono::steady_clock::now() + options_.coordinator_grace;
  for (int attempt = 0; !stop_ || attempt == 0; ++attempt) {
    req.set_worker_id(WorkerId());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ReportResultResponse resp;
    const grpc::Status rst = stub_->ReportResult(&ctx, req, &resp);
    const auto code = rst.error_code();
    if (rst.ok() || RefusedForGood(code) || std::chrono::steady_clock::now() > give_up) {
      return;  // heard, refused for good, or nobody left to tell
    }
    if (attempt % 20 == 0) Log("%s: result not heard yet (%s), retrying", a.job_id(), rst.error_message());
    std::this_thread::sleep_for(kReleaseRetry);
  }
}

// Runs the job to its end and reports the result (unless it leaves quietly) before its links
// close, so the coordinator hears this rank's word before peers see the links go. Every link and
// the data port's listener are closed when this returns.
void Daemon::RunJob(HeldJob& job) {
  const v1::Assignment& a = job.assignment();
  const int global = RankRun::GlobalRank(a);
  std::unique_ptr<TcpTransport> transport;
  HealthHooks hooks(a, RulesFor(options_.faults, global));
  RankRunOptions ropt;
  ropt.checkpoint_dir = options_.checkpoint_dir;
  ropt.connect_timeout = options_.connect_timeout;
  ropt.clock_ns = [this] { return WallNs() + clock_.offset_ns(); };
  ropt.hooks = &hooks;
  // The ranks agree on their transport (and NCCL's ids) through the coordinator; a cancel or a
  // stop ends a wait there within a second.
  CoordinatorRendezvousOptions rendezvous;
  rendezvous.job_id = a.job_id();
  rendezvous.worker_id = [this] { return WorkerId(); };
  rendezvous.timeout = options_.connect_timeout;
  rendezvous.stopped = [&job] { return job.cancelled(); };
  ropt.rendezvous = CoordinatorRendezvous(stub_.get(), std::move(rendezvous));
  // The assignment the rank runs under now: `a`, or its place in the job's latest plan (a shrink,
  // a growth). Every one is kept: `rank` and its executor refer to the one before while they
  // move to the next, and all outlive `rank`.
  std::vector<std::unique_ptr<v1::Assignment>> reshaped;
  const v1::Assignment* current = &a;
  RankRun rank(a, std::move(ropt));  // its executor and checkpoint writer outlive the code below
  std::unique_ptr<TelemetryOutbox> telemetry;
  RankRunCallbacks callbacks;
  callbacks.on_transport = [&](Transport* t) { return job.AttachTransport(t); };
  callbacks.on_start = [&](Executor* executor, AsyncCheckpointWriter* checkpoints) {
    if (!job.AttachExecutor(executor)) return false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hooks_ = &hooks;
      checkpoints_ = checkpoints;
      if (telemetry == nullptr) telemetry = std::make_unique<TelemetryOutbox>(stub_.get());  // one per job
      outbox_ = telemetry.get();
    }
    return true;
  };
  callbacks.on_step = [&](StepReport&& r) {
    v1::TelemetryBatch batch;
    batch.set_worker_id(WorkerId());
    batch.set_job_id(a.job_id());
    batch.set_rank(current->rank());
    batch.set_dp_rank(current->dp_rank());
    batch.set_tp_rank(current->tp_rank());
    batch.set_session(a.session());
    // Every action whole on the steps the checks read in detail, else folded by kind; tp ranks
    // other than 0 may leave their timings to their group's rank 0 (jobplan/telemetry_detail.h).
    jobplan::PutStepTimings(jobplan::TelemetryDetailOf(current->spec()), current->dp_rank(), current->tp_rank(),
                            r.summary.step(), std::move(r.actions), &batch);
    *batch.add_steps() = r.summary;
    return telemetry->Put(std::move(batch));  // the coordinator's refusal stops the rank
  };
  // Data planes of earlier recovery generations, shut down, kept until the job is over (a
  // background reduction of the step abandoned may still hold one).
  std::vector<std::unique_ptr<TcpTransport>> old_transports;
  TcpTransportOptions link_fault;  // --inject slowlink on this rank: its sends arrive late
  for (const FaultRule& f : RulesFor(options_.faults, global)) {
    if (f.kind != FaultRule::Kind::kSlowLink) continue;
    link_fault.send_delay = std::chrono::milliseconds(f.delay_ms);
    link_fault.send_delay_from_step = f.step;
  }
  const TransportSource source = [&](const v1::Assignment& current) -> Result<TcpTransport*> {
    if (current.has_recovery()) {
      Log("%s: resuming in place at step %s", a.job_id(), std::to_string(current.recovery().resume_step()));
    } else if (a.start_step() > 0) {
      Log("%s: resumed from the checkpoint of step %s", a.job_id(), std::to_string(a.start_step() - 1));
    }
    TcpTransportOptions topt = link_fault;
    topt.session = RankRun::DataSession(current);
    {
      std::lock_guard<std::mutex> lock(port_mu_);
      port_held_.reset();
    }
    if (transport != nullptr) {
      transport->Shutdown();  // frees the data port
      old_transports.push_back(std::move(transport));
    }
    auto listening = TcpTransport::Listen(options_.data_host, data_port_, topt);
    if (!listening.ok()) return listening.status();
    transport = std::move(listening).value();
    return transport.get();
  };
  Status st = rank.Run(source, callbacks);
  // In-place recovery: a rank of a job that recovers a lost rank in place, stopped by its broken
  // data plane or the coordinator's halt, keeps its state, says where it stands, and resumes when
  // the coordinator says so (or ends as any failed rank when no recovery comes).
  while (!st.ok() && jobplan::RunsStepCommit(a.spec()) && rank.executor() != nullptr && !job.cancelled() &&
         (job.halted() || st.code() == Code::kUnavailable)) {
    const v1::CommitState commit = rank.executor()->commit_state();
    if (transport != nullptr) transport->Shutdown();  // every peer sees this rank stop
    // What the steps reported is stored first: the coordinator may put this rank elsewhere in a
    // new plan, where a batch of its old place would be refused.
    if (telemetry != nullptr) (void)telemetry->Flush(std::chrono::steady_clock::now() + std::chrono::seconds(5));
    Report(*current, st, transport.get(), &commit);
    std::optional<v1::ResumeInPlace> resume = job.WaitRecovery(std::chrono::steady_clock::now() + kRecoveryWait);
    if (!resume.has_value()) {
      if (!job.cancelled()) st = Unavailable("no in-place recovery came within " + std::to_string(kRecoveryWait.count()) + " ms: " + st.message());
      break;
    }
    if (resume->has_reshaped()) {
      reshaped.push_back(std::make_unique<v1::Assignment>(resume->reshaped()));
      const v1::Assignment& next = *reshaped.back();
      Log("%s: going on in the job's new plan as %s", a.job_id(),
          jobplan::LayoutOf(next.spec()).Name(RankRun::GlobalRank(next)));
      job.Detach();  // the executor it reaches is replaced
      current = &next;  // before its steps report
      st = rank.Reshape(next, source, callbacks);
    } else {
      st = rank.Resume(resume->recovery(), source, callbacks);
    }
    if (resume->recovery().state_to_size() > 0) {
      Log("%s: streamed %s bytes of state to the spare", a.job_id(), std::to_string(rank.state_bytes_moved()));
    }
  }
  if (telemetry != nullptr && telemetry->coordinator_away()) {
    Log("%s: its run ended; %s telemetry batch(es) wait for the coordinator", a.job_id(),
        std::to_string(telemetry->waiting()));
  }
  if (telemetry != nullptr) {
    // What the coordinator has not stored yet is delivered before the result (a coordinator
    // away now has the grace to come back).
    Status tst = telemetry->Close(std::chrono::steady_clock::now() +
                                  (job.cancelled() ? std::chrono::milliseconds(5000) : options_.coordinator_grace));
    {
      std::lock_guard<std::mutex> lock(mu_);
      hooks_ = nullptr;
      checkpoints_ = nullptr;
      outbox_ = nullptr;
    }
    if (st.ok() && !tst.ok()) st = tst;
  }
  job.Detach();
  if (job.cancelled()) st = FailedPrecondition("stopped: " + job.cancel_reason());
  if (!job.quiet()) Report(*current, st, transport.get());
  if (transport != nullptr) transport->Shutdown();
}

}  // namespace pipecoord::worker
