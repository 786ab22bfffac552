// Daemon: a pipecoord worker. Registers with the coordinator, keeps its lease with heartbeats
// (which also sync its clock to the coordinator's), takes the jobs it is assigned from its command
// stream, runs each through RankRun (rank_run.h) streaming telemetry, and waits for more; until
// the stop flag is set.
//
// The life of a job on a worker (docs/operations.md), kept by this class:
//  - A job is held (HeldJob) from its assignment until every link of it is closed and the
//    coordinator heard ReleaseJob; only then may the worker be handed the next one. The rank's
//    result is reported before its links close, so the coordinator hears this rank's word before
//    its peers see the links go.
//  - The release is retried until heard, NOT_FOUND included: a coordinator that restarted does not
//    know this worker until the command loop registers again, naming the job it still holds, and
//    keeps the worker busy until the release arrives.
//  - A cancel from the coordinator and a stop request reach every phase: set-up, connecting to the
//    peers, running. A stop is graceful: a running job finishes its current step (its telemetry and
//    checkpoint complete) and fails naming it; a job not yet running is left quietly (no report, no
//    release: the coordinator queues it again when the worker deregisters). A job still running
//    after the shutdown grace is cancelled; then the worker deregisters.
//  - The coordinator may go away (a crash, a restart, a failover) without stopping training: the
//    job runs on, its telemetry waits in a TelemetryOutbox and its result is retried, and when a
//    coordinator answers again the worker registers naming the job and session it holds. The
//    coordinator either re-adopts it (the job goes on) or not (the worker stops it: the job was
//    failed or restarted elsewhere meanwhile). With no answer for coordinator_grace the job stops.
//  - Fencing: every answer and command carries the coordinator's epoch; one below the highest
//    seen (a coordinator paused through a failover) is not obeyed.
//  - Checkpoints: each heartbeat's answer names the held job's restart point; the job's checkpoint
//    files from there on are kept (AsyncCheckpointWriter::KeepFrom).
#ifndef PIPECOORD_WORKER_DAEMON_DAEMON_H_
#define PIPECOORD_WORKER_DAEMON_DAEMON_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "proto/worker.grpc.pb.h"
#include "worker/checkpoint/async_writer.h"
#include "worker/daemon/clock_sync.h"
#include "worker/daemon/fault_injection.h"
#include "worker/daemon/health_hooks.h"
#include "worker/daemon/held_job.h"
#include "worker/daemon/telemetry_outbox.h"
#include "worker/transport/port_reservation.h"
#include "worker/transport/tcp_transport.h"

namespace pipecoord::worker {

struct DaemonOptions {
  // The compute backend this worker offers, reported at registration: "cpu" or "cuda".
  std::string device = "cpu";
  // The memory this worker offers jobs, reported at registration (schedule "auto" plans against
  // the smallest; the memory check flags peaks near it). 0: not reported.
  uint64_t memory_bytes = 0;
  // Where peers send this worker activations (--data-listen): bound once at start, so the
  // endpoint the coordinator hands out stays true; each job listens there again. Port 0: a free
  // port, chosen at start.
  std::string data_host = "127.0.0.1";
  int data_port = 0;
  // The host name or address peers dial for the data port (--advertise, e.g. the pod IP). Empty:
  // the bound address.
  std::string advertise;
  // Where jobs with spec.checkpoint_every save and resume (--checkpoint-dir). Empty: none.
  std::string checkpoint_dir;
  // Faults to inject into every job this worker runs (--inject), for tests and demos.
  std::vector<FaultRule> faults;
  // How long a stop waits for a running job to finish its step before cancelling it. Kubernetes'
  // default terminationGracePeriodSeconds is 30: leave before the SIGKILL.
  std::chrono::milliseconds shutdown_grace{25000};
  // How long a job's Connect waits for its peers (RankRunOptions::connect_timeout).
  std::chrono::milliseconds connect_timeout{30000};
  // How long a running job goes on while no coordinator answers (hours: a restart or failover of
  // the coordinator must not stop training); then it stops.
  std::chrono::milliseconds coordinator_grace{std::chrono::hours(2)};
};

class Daemon {
 public:
  // `channel` reaches the coordinator. `stop` asks the daemon to shut down when it turns true (a
  // signal handler may set it: it is only read); it must outlive Run.
  Daemon(std::shared_ptr<grpc::Channel> channel, DaemonOptions options, const std::atomic<bool>& stop);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Serves until `stop` is set, then stops as the rules above say, deregisters and returns OK.
  // Errors: UNAVAILABLE when the data port cannot be bound or the stop came before any
  // registration was answered; the coordinator's refusal (INVALID_ARGUMENT, UNAUTHENTICATED,
  // PERMISSION_DENIED: retrying would not change it). Call once.
  Status Run();

 private:
  std::string WorkerId();
  std::shared_ptr<HeldJob> Held();
  // Registers (again, after a lost lease or a coordinator restart, naming the held job), retrying
  // until answered or stopped.
  Status RegisterWithRetry();
  // Every third of the lease the coordinator told last, on its KeepAlive stream (the unary call
  // for a coordinator without it); stops the held job after coordinator_grace without an answer.
  void HeartbeatLoop();
  // Never blocks on a job: the command stream is read on, so a cancel reaches a job in any phase.
  void Handle(const v1::WorkerCommand& cmd);
  // Waits for the stop flag, then cancels the command stream and stops the held job.
  void StopWatch();
  void Deregister();
  // The job's thread: runs it, reports how it ended, closes its links, then releases it.
  void HoldJob(const std::shared_ptr<HeldJob>& job);
  void RunJob(HeldJob& job);
  void Release(const v1::Assignment& a);
  // `awaiting`: the rank stopped for an in-place recovery and waits for it, standing there.
  void Report(const v1::Assignment& a, const Status& st, const TcpTransport* transport,
              const v1::CommitState* awaiting = nullptr);
  // Fencing: notes `epoch` and says whether it is current (not below the highest seen; 0, from a
  // coordinator that sends none, is current).
  bool CurrentEpoch(uint64_t epoch);

  std::unique_ptr<v1::WorkerService::Stub> stub_;
  const DaemonOptions options_;
  const std::atomic<bool>& stop_;
  int data_port_;
  std::string endpoint_;
  // Holds the data port while no job listens on it (bound, not listening: dialers are refused
  // as by a closed port), so that no other process, such as another worker started at the same
  // time with port 0, is given it: released just before a job's transport listens there, taken
  // again when the job is over.
  std::mutex port_mu_;
  std::optional<PortReservation> port_held_;
  ClockSync clock_;
  std::mutex mu_;
  std::string worker_id_;
  int64_t lease_ms_ = 5000;
  std::shared_ptr<HeldJob> held_;                 // from assignment until released; null when free
  HealthHooks* hooks_ = nullptr;                  // the running job's progress, for the heartbeat
  AsyncCheckpointWriter* checkpoints_ = nullptr;  // the running job's, told the restart point
  TelemetryOutbox* outbox_ = nullptr;             // the running job's, told what is stored
  uint64_t max_epoch_ = 0;
  grpc::ClientContext* commands_ctx_ = nullptr;
  std::thread job_thread_;
  std::atomic<bool> draining_{true};  // heartbeats go on until the last job has stopped
  // StopWatch has told the held job how to stop (the coordinator's drain step, or its own step):
  // Run waits for it before its own catch-all stop, which would otherwise stop the job after its
  // current step while the drain's answer (a later step, the same for every rank) is on its way.
  std::atomic<bool> stop_told_{false};
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_DAEMON_H_
