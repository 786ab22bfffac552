// RankRun: one rank of a job, from its assignment to its last step: the compute backend for the
// stages it holds, its checkpoints (resumed when the assignment restarts the job, saved every
// spec.checkpoint_every steps), its links to every other member of the job, and the Executor that
// walks its job list. The one "run one rank" path: the worker daemon runs each job it holds through
// it (daemon.h), and in-process runs one per global rank (local_run.h).
//
//   RankRun rank(assignment, options);
//   Status st = rank.Run(transport_source, callbacks);   // backend, checkpoints, Connect, steps
//   ... tell someone how it ended (transport->BrokenPeers() names who to suspect) ...
//   transport->Shutdown();                                // the caller owns the transport
//
// The executor, the backend and the checkpoint writer live as long as the RankRun, so whatever was
// made reachable from another thread (a HeldJob) can be detached after Run returns and before they
// go. Not thread-safe: one thread calls Run, once; callbacks run on that thread.
#ifndef PIPECOORD_WORKER_DAEMON_RANK_RUN_H_
#define PIPECOORD_WORKER_DAEMON_RANK_RUN_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/worker.pb.h"
#include "worker/checkpoint/async_writer.h"
#include "worker/parallel/tensor_parallel.h"
#include "worker/daemon/compute_backend.h"
#include "worker/daemon/executor.h"
#include "worker/daemon/run_hooks.h"
#include "worker/transport/rendezvous.h"
#include "worker/transport/tcp_transport.h"

namespace pipecoord::worker {

struct RankRunOptions {
  // Where the job's checkpoints are kept and found (a daemon's --checkpoint-dir). Empty: none; a
  // job that saves (spec.checkpoint_every) or resumes them then fails FAILED_PRECONDITION.
  std::string checkpoint_dir;
  // How long Connect waits for every peer. Every member is free when a job is handed out, so links
  // come up in well under a second; this only bounds a peer that died between its assignment and
  // its lease running out.
  std::chrono::milliseconds connect_timeout{30000};
  // The clock of the timings reported (the coordinator's, offset applied). Empty: this machine's
  // wall clock.
  std::function<int64_t()> clock_ns;
  // Progress, probes and injected faults (HealthHooks). Null: none. Not owned; outlives Run.
  RunHooks* hooks = nullptr;
  // The job's key-value rendezvous (a daemon's goes through the coordinator, an in-process run's
  // stays in memory), through which the ranks of a device backend agree on the transport their
  // tensors take (ComputeBackend::BoundaryTransport; bounded by connect_timeout). Empty: none;
  // the CUDA backend then stages its tensors through the host.
  RendezvousFn rendezvous;
};

// Gives the rank its transport once the backend and checkpoints are ready: listening (on the
// endpoint the assignment's peers list for this rank), not yet connected; not owned by RankRun, it
// must outlive it. A daemon listens on its data port with the job's session; an in-process run
// hands out transports it listened on before any rank started. An error ends the rank with it.
using TransportSource = std::function<Result<TcpTransport*>(const v1::Assignment& assignment)>;

// What Run tells its caller on the way, on Run's thread. Only on_step is required.
struct RankRunCallbacks {
  // The transport exists (listening, before Connect): the moment to make it reachable by a stop
  // from another thread (HeldJob::AttachTransport). Returning false stops the rank there.
  // Called again, after Connect, with the backend's boundary transport when it built one (the
  // one the executor then waits on; a staged one shuts the TCP one down with it).
  std::function<bool(Transport* transport)> on_transport;
  // Connected; the executor is about to run the first step. `checkpoints` is the job's writer (null
  // when it saves none), alive as long as the RankRun. The moment to attach the executor
  // (HeldJob::AttachExecutor) and open what the steps report to. Returning false stops the rank.
  std::function<bool(Executor* executor, AsyncCheckpointWriter* checkpoints)> on_start;
  // Each finished step, in order; a non-OK return stops the run with that error.
  std::function<Status(StepReport&& report)> on_step;
};

class RankRun {
 public:
  // `assignment` must outlive the RankRun (the executor keeps a reference).
  RankRun(const v1::Assignment& assignment, RankRunOptions options);
  ~RankRun();
  RankRun(const RankRun&) = delete;
  RankRun& operator=(const RankRun&) = delete;

  // Builds the backend (MakeBackend), prepares the checkpoints (PrepareCheckpoints: resumes from
  // step start_step - 1 when start_step > 0), takes the transport from `source`, connects it to
  // every peer of the assignment (session assignment.session()), asks the backend for its
  // boundary transport (with the other ranks, through options.rendezvous), and runs steps
  // start_step .. spec.steps - 1. Returns the first error; FAILED_PRECONDITION "stopped before it ran" when a
  // callback said stop. The transport is left open: the caller reports first, then shuts it down.
  // Memory the host cannot give (std::bad_alloc on the run's thread) is RESOURCE_EXHAUSTED
  // naming the rank, never a crash: the worker reports it and lives on.
  Status Run(const TransportSource& source, const RankRunCallbacks& callbacks);
  // In-place recovery of a lost rank (jobs with jobplan::RunsStepCommit): after Run failed on a
  // broken data plane or a halt, with this RankRun's backend and executor still holding the
  // rank's state, rebuilds the data plane for `recovery` (listening through `source` with the
  // assignment's peers and recovery replaced, connecting with DataSession), brings the state to
  // the end of step resume_step - 1 (Executor::ResumeAt: a step another rank committed is applied
  // here, the step in flight abandoned), streams it to recovery.state_to (the spares this rank is
  // the replica of), and runs on from resume_step. Only on_step and on_transport are called.
  // FAILED_PRECONDITION when Run never got as far as running steps.
  Status Resume(const v1::Recovery& recovery, const TransportSource& source, const RankRunCallbacks& callbacks);
  // The shrink (no spare was free): as Resume, but the job goes on with one data-parallel replica
  // fewer at the same global batch, and `reshaped` (its recovery set) is this rank's assignment in
  // the new plan, possibly as another global rank with another job list. The state is brought to
  // the end of step resume_step - 1 (its report is not given: the coordinator completed the old
  // layout's records), copied tensor by tensor into the backend of the new assignment, and saved
  // as that step's checkpoint under the new global rank when the job checkpoints (a later restart
  // resumes there); then the data plane is rebuilt, the state streamed to recovery.state_to (a
  // new replica's ranks when the job grows back), and the run goes on. Calls on_transport,
  // on_start (the new executor) and on_step. `reshaped` must outlive the RankRun.
  Status Reshape(const v1::Assignment& reshaped, const TransportSource& source, const RankRunCallbacks& callbacks);
  // The assignment the rank runs now: the constructor's, or Reshape's.
  const v1::Assignment& assignment() const { return *assignment_; }
  // The executor of the last Run (null before it started running steps).
  Executor* executor() const { return executor_.get(); }
  // Bytes of state this rank streamed to spares, or received as one (0: none).
  uint64_t state_bytes_moved() const { return state_bytes_; }

  // The session the assignment's data plane connects with: jobplan::DataPlaneSession of its
  // session and its recovery's generation (0 without one).
  static uint64_t DataSession(const v1::Assignment& assignment);

  // The backend Run built (null before): after Run, it holds the state of the last step.
  ComputeBackend* backend() const { return backend_.get(); }

  // The rank's index among all members of the job (jobplan/layout.h).
  static int GlobalRank(const v1::Assignment& assignment);
  // The global ranks this rank exchanges tensors with, ascending: the ranks of its replica holding
  // a stage next to one of its own (stage_to_rank), with dp > 1 its neighbours on the all-reduce
  // ring (replicas dp_rank - 1 and dp_rank + 1, mod dp, same pipeline and tp rank), and with
  // tp > 1 its neighbours on the tensor-parallel ring (tp_rank - 1 and tp_rank + 1, mod tp).
  static std::vector<int> TensorPeers(const v1::Assignment& assignment);

 private:
  Status RunOrThrow(const TransportSource& source, const RankRunCallbacks& callbacks);
  Status ResumeOrThrow(const v1::Recovery& recovery, const TransportSource& source, const RankRunCallbacks& callbacks);
  Status ReshapeOrThrow(const v1::Assignment& reshaped, const TransportSource& source, const RankRunCallbacks& callbacks);
  // The data plane of `a`: its transport from `source`, shown to callbacks.on_transport, connected
  // to a's peers under a's session. FAILED_PRECONDITION "stopped before it ran" when on_transport
  // declines.
  Result<TcpTransport*> ConnectDataPlane(const v1::Assignment& a, const TransportSource& source, const RankRunCallbacks& callbacks);
  // A new executor of `a` over this rank's backend and checkpoints, shown to callbacks.on_start,
  // then run to its end.
  // host_transport: ExecutorOptions::host_transport (the TCP link under a device-only transport).
  Status RunNewExecutor(const v1::Assignment& a, Transport* transport, const RankRunCallbacks& callbacks,
                        Transport* host_transport = nullptr);
  // The rank's state (ComputeBackend::CheckpointState and its optimizer step count) to or from
  // global rank `peer`, tensor by tensor on the recovery channel; bytes added to state_bytes_.
  Status SendState(TcpTransport& link, int peer, int step);
  Status ReceiveState(TcpTransport& link, int peer, int step);

  const v1::Assignment* assignment_;  // the constructor's, or Reshape's (reshaped_)
  RankRunOptions options_;
  // With spec.tp > 1: the stage's tensor-parallel group (common/rank_layout.h's TensorGroup) on the
  // rank's TCP transport; declared before the backend, whose stages use it, so it outlives them.
  std::unique_ptr<parallel::RingTensorParallel> tensor_parallel_;
  std::unique_ptr<ComputeBackend> backend_;
  std::unique_ptr<AsyncCheckpointWriter> checkpoints_;
  std::unique_ptr<Transport> boundary_;  // the backend's transport over the TCP one, if it has one
  std::unique_ptr<v1::Assignment> recovered_;  // the assignment as Resume rebuilt it
  uint64_t state_bytes_ = 0;
  std::unique_ptr<Executor> executor_;  // declared last: goes first
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_RANK_RUN_H_
