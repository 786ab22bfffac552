// worker: a pipecoord worker daemon. Registers with the coordinator, keeps its lease, runs the
// job lists it is assigned on its compute backend and reports telemetry; then waits for more.
//   worker --coordinator 127.0.0.1:50051 [--device cpu] [--data-listen 127.0.0.1:0] [--advertise HOST]
//          [--tls-ca FILE --tls-cert FILE --tls-key FILE]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

#include "common/client_credentials.h"
#include "common/flags.h"
#include "proto/worker.grpc.pb.h"
#include "worker/daemon/backend_factory.h"
#include "worker/daemon/checkpointing.h"
#include "worker/daemon/clock_sync.h"
#include "worker/daemon/executor.h"
#include "worker/daemon/fault_injection.h"
#include "worker/daemon/health_hooks.h"
#include "worker/daemon/held_job.h"
#include "worker/transport/endpoint.h"
#include "worker/transport/tcp_transport.h"

namespace pipecoord::worker {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }
std::vector<FaultRule> g_faults;  // --inject, for every job this worker runs

int64_t WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

void Log(const char* fmt, const std::string& a = "", const std::string& b = "") {
  std::fprintf(stderr, "worker: ");
  std::fprintf(stderr, fmt, a.c_str(), b.c_str());
  std::fprintf(stderr, "\n");
}

class Daemon {
 public:
  // advertise: the host peers dial for the data port (empty: the bound address).
  // checkpoint_dir: where jobs with spec.checkpoint_every save and resume (empty: none).
  Daemon(std::shared_ptr<grpc::Channel> channel, std::string device, std::string data_host, int data_port,
         std::string advertise, std::string checkpoint_dir)
      : stub_(v1::WorkerService::NewStub(channel)), device_(std::move(device)),
        data_host_(std::move(data_host)), advertise_(std::move(advertise)), checkpoint_dir_(std::move(checkpoint_dir)),
        data_port_(data_port) {}

  int Run() {
    // The data port is bound once, so the endpoint the coordinator hands to peers stays true.
    auto probe = TcpTransport::Listen(data_host_, data_port_);
    if (!probe.ok()) {
      Log("cannot listen for peers: %s", probe.status().message());
      return 1;
    }
    endpoint_ = (*probe)->endpoint();
    data_port_ = std::stoi(endpoint_.substr(endpoint_.rfind(':') + 1));
    if (!advertise_.empty()) {
      endpoint_ = FormatHostPort(advertise_, data_port_);
    } else if (data_host_ == "0.0.0.0" || data_host_ == "::") {
      Log("listening on %s without --advertise: peers on other hosts cannot reach it", endpoint_);
    }
    (*probe)->Shutdown();
    probe->reset();
    if (!RegisterWithRetry()) return 1;
    std::thread heartbeat([this] { HeartbeatLoop(); });
    // A signal cannot cancel an RPC or stop a job itself; this thread does both at once, so a
    // SIGTERM is honoured in every state: idle, setting up, connecting, running.
    std::thread stopper([this] {
      while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::shared_ptr<HeldJob> job;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (commands_ctx_ != nullptr) commands_ctx_->TryCancel();
        job = held_;
      }
      if (job != nullptr) {
        Log(job->StopGracefully() ? "shutting down: finishing the current step of %s"
                                  : "shutting down: leaving %s before it started (it goes back to the queue)",
            job->assignment().job_id());
      }
    });
    while (!g_stop) {
      grpc::ClientContext ctx;
      {
        std::lock_guard<std::mutex> lock(mu_);
        commands_ctx_ = &ctx;
      }
      v1::CommandsRequest req;
      req.set_worker_id(WorkerId());
      auto reader = stub_->Commands(&ctx, req);
      v1::WorkerCommand cmd;
      while (!g_stop && reader->Read(&cmd)) Handle(cmd);
      grpc::Status st = reader->Finish();
      {
        std::lock_guard<std::mutex> lock(mu_);
        commands_ctx_ = nullptr;
      }
      if (g_stop) break;
      if (st.error_code() == grpc::StatusCode::NOT_FOUND) RegisterWithRetry();  // lease lost
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    // A job started just before the signal was seen is told too.
    if (std::shared_ptr<HeldJob> job = Held(); job != nullptr) job->StopGracefully();
    const auto grace_end = std::chrono::steady_clock::now() + kShutdownGrace;
    while (Held() != nullptr && std::chrono::steady_clock::now() < grace_end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (std::shared_ptr<HeldJob> job = Held(); job != nullptr) job->Cancel("the worker's shutdown grace period ran out");
    if (job_thread_.joinable()) job_thread_.join();
    draining_ = false;
    stopper.join();
    heartbeat.join();
    Deregister();
    return 0;
  }

 private:
  std::string WorkerId() {
    std::lock_guard<std::mutex> lock(mu_);
    return worker_id_;
  }

  std::shared_ptr<HeldJob> Held() {
    std::lock_guard<std::mutex> lock(mu_);
    return held_;
  }

  bool RegisterWithRetry() {
    for (int attempt = 0; !g_stop; ++attempt) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1::RegisterRequest req;
      req.set_device_kind(device_);
      req.set_host(advertise_.empty() ? data_host_ : advertise_);
      req.set_data_endpoint(endpoint_);
      req.set_worker_id(WorkerId());
      if (std::shared_ptr<HeldJob> job = Held(); job != nullptr) {
        // Still closing a job: the coordinator keeps this worker busy until it is released.
        req.set_held_job_id(job->assignment().job_id());
        req.set_held_session(job->assignment().session());
      }
      v1::RegisterResponse resp;
      grpc::Status st = stub_->Register(&ctx, req, &resp);
      if (st.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        worker_id_ = resp.worker_id();
        lease_ms_ = resp.lease_ms();
        Log("registered as %s, peers reach it at %s", worker_id_, endpoint_);
        return true;
      }
      // Bad input or credentials do not get better by retrying (a live registration of the same
      // certificate, FAILED_PRECONDITION, does once its lease expires).
      if (st.error_code() == grpc::StatusCode::INVALID_ARGUMENT || st.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
          st.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
        Log("registration refused: %s", st.error_message());
        return false;
      }
      if (attempt % 10 == 0) Log("coordinator not reachable yet (%s), retrying", st.error_message());
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return false;
  }

  void HeartbeatLoop() {
    auto last_heard = std::chrono::steady_clock::now();
    while (!g_stop || draining_) {
      int64_t lease;
      {
        std::lock_guard<std::mutex> lock(mu_);
        lease = lease_ms_;
      }
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(lease));
      v1::HeartbeatRequest req;
      req.set_worker_id(WorkerId());
      const int64_t t0 = WallNs();
      req.set_worker_send_ns(t0);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (hooks_ != nullptr) *req.mutable_progress() = hooks_->progress();
      }
      v1::HeartbeatResponse resp;
      if (stub_->Heartbeat(&ctx, req, &resp).ok()) {
        clock_.AddSample(t0, resp.coordinator_recv_ns(), resp.coordinator_send_ns(), WallNs());
        last_heard = std::chrono::steady_clock::now();
        std::lock_guard<std::mutex> lock(mu_);
        if (checkpoints_ != nullptr && held_ != nullptr && resp.job_id() == held_->assignment().job_id() &&
            resp.checkpointed_steps() > 0) {
          checkpoints_->KeepFrom(resp.checkpointed_steps() - 1);  // the coordinator's restart point
        }
      } else if (std::chrono::steady_clock::now() - last_heard > std::chrono::milliseconds(lease)) {
        // The coordinator has had no heartbeat for a lease: it counts this worker gone and is
        // failing or restarting its job elsewhere (or is down itself). Running on would only
        // write checkpoints and telemetry nobody will read, beside the job's next attempt.
        if (std::shared_ptr<HeldJob> job = Held(); job != nullptr && !job->cancelled() && !job->releasing()) {
          Log("%s: no answer from the coordinator for a lease (%s ms): stopping the job", job->assignment().job_id(),
              std::to_string(lease));
          job->Cancel("no answer from the coordinator for a lease");
        }
      }
      for (int i = 0; i < 10 && (!g_stop || draining_); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(lease / 30));
    }
  }

  // Never blocks on a job: the command stream is read on, so a cancel reaches a job in any phase.
  void Handle(const v1::WorkerCommand& cmd) {
    if (cmd.has_assign()) {
      if (g_stop) {
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
    } else if (!cmd.cancel_job_id().empty()) {
      std::shared_ptr<HeldJob> job = Held();
      if (job != nullptr && job->assignment().job_id() == cmd.cancel_job_id()) {
        Log("%s: cancelled by the coordinator", cmd.cancel_job_id());
        job->Cancel("cancelled by the coordinator");
      }
    }
  }

  // Kubernetes' default terminationGracePeriodSeconds is 30: leave before the SIGKILL.
  static constexpr std::chrono::seconds kShutdownGrace{25};

  void Deregister() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::DeregisterRequest req;
    req.set_worker_id(WorkerId());
    v1::DeregisterResponse resp;
    grpc::Status st = stub_->Deregister(&ctx, req, &resp);
    if (st.ok()) Log("deregistered %s", WorkerId());
  }

  // The job's thread: runs it, reports how it ended, closes its links, then releases it.
  void HoldJob(const std::shared_ptr<HeldJob>& job) {
    const v1::Assignment& a = job->assignment();
    Log("%s: running rank %s", a.job_id(), std::to_string(a.rank()) + " (dp " + std::to_string(a.dp_rank()) + ")");
    RunJob(*job);
    job->MarkReleasing();
    if (!job->quiet()) Release(a);
    std::lock_guard<std::mutex> lock(mu_);
    if (held_ == job) held_.reset();
  }

  // Tells the coordinator every link of the job is closed, so it may hand this worker the next
  // one; retried until it is heard. NOT_FOUND (a coordinator that restarted does not know this
  // worker yet) is retried too: the command loop registers again, naming this hold, and the
  // coordinator keeps the worker busy until this release arrives.
  void Release(const v1::Assignment& a) {
    for (int attempt = 0; !g_stop; ++attempt) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1::ReleaseJobRequest req;
      req.set_worker_id(WorkerId());
      req.set_job_id(a.job_id());
      req.set_session(a.session());
      v1::ReleaseJobResponse resp;
      grpc::Status st = stub_->ReleaseJob(&ctx, req, &resp);
      const auto code = st.error_code();
      if (st.ok() || code == grpc::StatusCode::PERMISSION_DENIED || code == grpc::StatusCode::UNAUTHENTICATED ||
          code == grpc::StatusCode::INVALID_ARGUMENT) {
        return;  // heard (or refused for good: retrying would not change it)
      }
      if (attempt % 20 == 0) Log("%s: release not heard yet (%s), retrying", a.job_id(), st.error_message());
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }

  // Tells the coordinator how this rank's part ended; on failure, with the peers whose links
  // broke or never came up (from `transport`, when there is one), so the coordinator can find the
  // root cause rather than blame this rank.
  void Report(const v1::Assignment& a, const Status& st, const TcpTransport* transport) {
    v1::ReportResultRequest req;
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
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ReportResultResponse resp;
    stub_->ReportResult(&ctx, req, &resp);
    Log("%s: %s", a.job_id(), st.ok() ? std::string("done") : st.ToString());
  }

  // Runs the job to its end and reports the result (unless it leaves quietly) before its links
  // close, so the coordinator hears this rank's word before peers see the links go. Every link and
  // the data port's listener are closed when this returns.
  void RunJob(HeldJob& job) {
    const v1::Assignment& a = job.assignment();
    const int global = a.dp_rank() * a.spec().pp() + a.rank();
    std::unique_ptr<TcpTransport> transport;
    auto finish = [&](Status st) {
      job.Detach();
      if (job.cancelled()) st = FailedPrecondition("stopped: " + job.cancel_reason());
      if (!job.quiet()) Report(a, st, transport.get());
      if (transport != nullptr) transport->Shutdown();
    };
    auto backend = MakeBackend(a);
    if (!backend.ok()) return finish(backend.status());
    // A restart resumes from this rank's checkpoint in the (shared) checkpoint dir.
    auto checkpoint = PrepareCheckpoints(a, global, checkpoint_dir_, backend->get());
    if (!checkpoint.ok()) return finish(checkpoint.status());
    if (a.start_step() > 0) Log("%s: resumed from the checkpoint of step %s", a.job_id(), std::to_string(a.start_step() - 1));
    TcpTransportOptions topt;
    topt.session = a.session();
    auto listening = TcpTransport::Listen(data_host_, data_port_, topt);
    if (!listening.ok()) return finish(listening.status());
    transport = std::move(listening).value();
    if (!job.AttachTransport(transport.get())) return finish(Status::Ok());
    std::map<int, std::string> peers;
    for (const v1::Peer& p : a.peers()) {
      if (p.global_rank() != global) peers[p.global_rank()] = p.data_endpoint();
    }
    if (Status st = transport->Connect(global, peers, a.session(), kConnectTimeout); !st.ok()) return finish(st);
    ExecutorOptions eopt;
    eopt.clock_ns = [this] { return WallNs() + clock_.offset_ns(); };
    HealthHooks hooks(a, RulesFor(g_faults, global));
    eopt.hooks = &hooks;
    eopt.checkpoints = checkpoint->get();  // lives until this function returns, after the executor
    Executor executor(a, backend->get(), transport.get(), eopt);
    if (!job.AttachExecutor(&executor)) return finish(Status::Ok());
    {
      std::lock_guard<std::mutex> lock(mu_);
      hooks_ = &hooks;
      checkpoints_ = checkpoint->get();
    }
    grpc::ClientContext tctx;
    v1::TelemetryAck ack;
    auto telemetry = stub_->Telemetry(&tctx, &ack);
    Status st = executor.Run([&](StepReport&& r) {
      v1::TelemetryBatch batch;
      batch.set_worker_id(WorkerId());
      batch.set_job_id(a.job_id());
      batch.set_rank(a.rank());
      batch.set_dp_rank(a.dp_rank());
      batch.set_session(a.session());
      for (auto& t : r.actions) *batch.add_actions() = std::move(t);
      *batch.add_steps() = r.summary;
      if (!telemetry->Write(batch)) return Unavailable("telemetry stream to the coordinator closed");
      return Status::Ok();
    });
    telemetry->WritesDone();
    grpc::Status tst = telemetry->Finish();
    {
      std::lock_guard<std::mutex> lock(mu_);
      hooks_ = nullptr;
      checkpoints_ = nullptr;
    }
    if (st.ok() && !tst.ok()) st = Unavailable("telemetry refused: " + tst.error_message());
    finish(st);
  }

  // Every member is free when a job is handed out, so links come up in well under a second; this
  // only bounds a peer that died between its assignment and its lease running out.
  static constexpr std::chrono::seconds kConnectTimeout{30};

  std::unique_ptr<v1::WorkerService::Stub> stub_;
  const std::string device_, data_host_, advertise_, checkpoint_dir_;
  int data_port_;
  std::string endpoint_;
  ClockSync clock_;
  std::mutex mu_;
  std::string worker_id_;
  int64_t lease_ms_ = 5000;
  std::shared_ptr<HeldJob> held_;  // from assignment until released; null when free
  HealthHooks* hooks_ = nullptr;   // the running job's progress, for the heartbeat
  AsyncCheckpointWriter* checkpoints_ = nullptr;  // the running job's, told the restart point
  grpc::ClientContext* commands_ctx_ = nullptr;
  std::thread job_thread_;
  std::atomic<bool> draining_{true};  // heartbeats go on until the last job has stopped
};

}  // namespace
}  // namespace pipecoord::worker

int main(int argc, char** argv) {
  using namespace pipecoord;
  std::string coordinator_addr, device = "cpu", data_listen = "127.0.0.1:0", advertise;
  FlagSet flags("worker --coordinator HOST:PORT [--device cpu|cuda] [--data-listen HOST:PORT] [--advertise HOST] "
                     "[--checkpoint-dir DIR] [--tls-ca FILE --tls-cert FILE --tls-key FILE]",
                     "A pipecoord worker: registers with the coordinator, runs the job lists it is "
                     "assigned (its rank comes from the assignment) and reports telemetry.");
  flags.String("coordinator", &coordinator_addr, "the coordinator's gRPC address (or PIPECOORD_ADDR)");
  flags.String("device", &device, "compute backend: cpu (default) or cuda");
  std::string checkpoint_dir;
  flags.String("checkpoint-dir", &checkpoint_dir,
               "directory for the checkpoints of jobs with checkpointEvery (DIR/JOB/rank-G/step-N.ckpt); a "
               "replacement worker resumes from it: give it the failed worker's volume (a StatefulSet does) "
               "or one folder shared by all workers");
  std::string inject;
  flags.String("inject", &inject,
               "faults to inject, for tests and demos: RULE[,RULE...] with RULE slow:RANK:FACTOR, "
               "hang:RANK:STEP, corrupt:RANK:STEP or oom:RANK:BYTES (RANK: global rank)");
  flags.String("data-listen", &data_listen, "address peers send activations to (default 127.0.0.1:0: any free port)");
  flags.String("advertise", &advertise,
               "host name or IP peers dial for the data port, e.g. the pod IP (default: the --data-listen "
               "host; needed when that is 0.0.0.0)");
  // Mutual TLS to the coordinator (docs/operations.md "Security"); the data port stays plaintext.
  ClientTlsFlags tls;
  flags.String("tls-ca", &tls.ca_file, "PEM CA the coordinator's certificate must verify against (default: plaintext)");
  flags.String("tls-cert", &tls.cert_file,
               "PEM client certificate; its URI SAN urn:pipecoord:worker:ID is this worker's id (with --tls-ca)");
  flags.String("tls-key", &tls.key_file, "PEM private key of --tls-cert");
  Status st = flags.Parse(argc - 1, argv + 1);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (coordinator_addr.empty() && std::getenv("PIPECOORD_ADDR")) coordinator_addr = std::getenv("PIPECOORD_ADDR");
  if (st.ok() && coordinator_addr.empty()) st = InvalidArgument("--coordinator: required (or set PIPECOORD_ADDR)");
  if (st.ok() && flags.Given("checkpoint-dir") && checkpoint_dir.empty()) st = InvalidArgument("--checkpoint-dir: must not be empty");
  if (st.ok() && device != "cpu" && device != "cuda") st = InvalidArgument("--device: must be cpu or cuda, got \"" + device + "\"");
  if (st.ok()) {
    auto rules = worker::ParseFaultRules(inject);
    if (rules.ok()) worker::g_faults = std::move(rules).value();
    else st = rules.status();
  }
  const size_t colon = data_listen.rfind(':');
  if (st.ok() && colon == std::string::npos) st = InvalidArgument("--data-listen: must be HOST:PORT");
  // A host name or an IPv4/IPv6 address, never HOST:PORT nor an unexpanded "$(POD_IP)".
  const bool bad_advertise =
      (flags.Given("advertise") && advertise.empty()) || std::count(advertise.begin(), advertise.end(), ':') == 1 ||
      advertise.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:") != std::string::npos;
  if (st.ok() && bad_advertise) {
    st = InvalidArgument("--advertise: must be a host name or IP address without a port, got \"" + advertise + "\"");
  }
  if (st.ok() && !tls.ca_file.empty() && tls.cert_file.empty()) {
    st = InvalidArgument("--tls-cert: required with --tls-ca (the coordinator knows workers by their client certificate)");
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (st.ok()) {
    auto made = ClientCredentials(tls);
    if (made.ok()) credentials = std::move(made).value();
    else st = made.status();
  }
  if (!st.ok()) {
    std::fprintf(stderr, "worker: %s\n", st.message().c_str());
    return 2;
  }
  std::signal(SIGINT, worker::OnSignal);
  std::signal(SIGTERM, worker::OnSignal);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  // Keepalive on the long-lived command and telemetry streams: a dead coordinator is noticed in
  // ~15 s even when no call is in flight (the server permits pings this often).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  auto channel = grpc::CreateCustomChannel(coordinator_addr, credentials, args);
  worker::Daemon daemon(channel, device, data_listen.substr(0, colon), std::stoi(data_listen.substr(colon + 1)),
                        advertise, checkpoint_dir);
  return daemon.Run();
}
