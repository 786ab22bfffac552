// Coordinator: the state behind the gRPC services. Jobs (submitted, planned, dispatched, watched),
// workers (registered, leased, assigned) and telemetry (steps measured). Thread-safe; no gRPC
// types, so it is tested directly and the service handlers stay a few lines each.
//
// It decides a job's life (dispatch, finish, restart, requeue) over pieces with no lock of their
// own, all guarded by its one mutex: WorkerRegistry (workers, leases, the job each holds), a
// JobRecord per job (TelemetryOrder, StepAggregator and AttemptOutcome for the current attempt)
// and StateWriter (every change written through to the state file).
#ifndef PIPECOORD_COORDINATOR_COORDINATOR_H_
#define PIPECOORD_COORDINATOR_COORDINATOR_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "coordinator/health/job_monitor.h"
#include "coordinator/lease_board.h"
#include "coordinator/state_store.h"
#include "coordinator/state_writer.h"
#include "coordinator/stream_wakeups.h"
#include "coordinator/worker_registry.h"
#include "jobplan/calibration.h"
#include "planner/schedule_cache.h"
#include "coordinator/health/metrics_sink.h"
#include "proto/job.pb.h"
#include "proto/telemetry.pb.h"
#include "proto/worker.pb.h"

namespace pipecoord::coordinator {

using Clock = std::chrono::steady_clock;

// A failure a rank reports with the same message on this many distinct workers is the job's own
// (out of memory, a bad input): it is not restarted again.
inline constexpr int kSameFailureWorkers = 2;

struct JobRecord;
struct QueuedStep;
enum class AfterStop;  // job_record.h

struct CoordinatorOptions {
  std::chrono::milliseconds lease{5000};  // a worker silent this long is gone (the least lease)
  // The lease grows with the fleet so that its heartbeats (each worker's every lease / 3) stay
  // under this many a second: the lease is max(lease, 3 s x registered workers / this), told to
  // every worker in its Register and Heartbeat answers (at 16,384 workers and 2,000 a second:
  // 24.6 s, a beat every 8.2 s). A heartbeat costs the coordinator about 0.1 ms of CPU on the
  // development machine, unary or streamed (//bench:fleet_telemetry_bench), so 16,384 workers at
  // the 5 s lease would take a whole core. 0: the lease stays `lease`.
  int max_heartbeats_per_s = 2000;
  // A rank that fails because its link to a peer broke suspects that peer; the coordinator
  // waits this long (capped at the lease) for the peer's own report or lease loss, the root
  // cause, before failing the job with the suspect named.
  std::chrono::milliseconds suspect_grace{1000};
  // After a restart, how long a job that was RUNNING waits for its workers to register again
  // holding it (they ride out a coordinator's absence, docs/operations.md); a rank still missing
  // then fails the attempt (the restart policy applies).
  std::chrono::milliseconds adopt_grace{60000};
  // How long the other ranks of a job recovering a lost rank in place have to stop and say where
  // they stand (at least two leases); one still running then fails the attempt (the restart
  // policy applies).
  std::chrono::milliseconds recovery_grace{10000};
  // Stored jobs, at least 1: finished ones are kept for listing and traces until a new job needs
  // room (the oldest finished one goes, from the state file too); all live: RESOURCE_EXHAUSTED.
  size_t max_jobs = 10000;
  size_t max_updates_per_job = 100000;    // WatchJob log bound
  size_t trace_actions_per_job = 200000;  // measured actions kept for `pipectl trace`
  // Wall clock in ns since the epoch; replaceable in tests.
  std::function<int64_t()> now_ns;
  // Measurements also go here (the /metrics exporter); may be null, not owned.
  health::MetricsSink* metrics = nullptr;
  // How long a finished job's series stay in `metrics` after it ended (its history stays in the
  // state and GetJob): /metrics stays the size of the recent jobs, not of --max-jobs of them.
  std::chrono::milliseconds metrics_retention{std::chrono::hours(1)};
  // Durable state (--state); may be null (state in memory only), not owned. Every change is
  // written through before it is acknowledged; Restore() reads it back.
  StateStore* store = nullptr;
};

class Coordinator {
 public:
  explicit Coordinator(CoordinatorOptions options = {});

  // Loads options.store's state: every job with its events, steps and measured actions, the
  // worker identities handed out and the id counters, and starts a new epoch (one above the
  // stored one). A job that was RUNNING when the previous coordinator stopped stays RUNNING: its
  // workers keep training and register again holding it (Register re-adopts each rank; the
  // telemetry they kept is taken where the stored one ends); a rank not back within
  // options.adopt_grace fails the attempt (the restart policy applies). PENDING jobs wait for
  // workers as before. Call once, before serving.
  Status Restore();
  ~Coordinator();

  // --- Jobs (JobService) ---
  // Validates (INVALID_ARGUMENT naming the field), plans, stores PENDING and dispatches if
  // enough workers are free. Schedule "auto" is planned for the workers free now
  // (jobplan::PlanAuto; FAILED_PRECONDITION when none is or nothing fits them) and stored
  // resolved, with its report. `dry_run`: plans and answers, stores and starts nothing.
  Result<v1::SubmitJobResponse> SubmitJob(const v1::JobSpec& spec, bool dry_run = false);
  Result<v1::Job> GetJob(const std::string& job_id) const;  // NOT_FOUND
  std::vector<v1::Job> ListJobs() const;                      // without plans, newest last
  // Cancels a PENDING or RUNNING job (workers are told to stop); a terminal job stays as is.
  // With `checkpoint`, a RUNNING job stops after one step that every rank checkpoints (as Drain)
  // and ends CANCELLED then; FAILED_PRECONDITION when it saves no checkpoints or is not running.
  Result<v1::JobState> CancelJob(const std::string& job_id, bool checkpoint = false);
  // Appends to `out` the job's updates from *cursor on, waiting until there is at least one or
  // `deadline` passes; advances *cursor. *finished: the job is terminal and all was read.
  Status WaitJobUpdates(const std::string& job_id, size_t* cursor, std::vector<v1::JobUpdate>* out,
                        Clock::time_point deadline, bool* finished) const;
  std::vector<v1::WorkerInfo> ListWorkers() const;
  // The measured run as a Chrome/Perfetto trace (one track per rank, predicted idle beside it).
  Result<std::string> Trace(const std::string& job_id) const;
  // The job's health checks as the dashboard shows them (NOT_FOUND).
  Result<health::HealthSnapshot> JobHealth(const std::string& job_id) const;

  // --- Workers (WorkerService) ---
  // A worker_id in the request re-registers that identity (after a coordinator restart). One
  // that names a held job (held_job_id, held_session) keeps its rank when that attempt is still
  // running with it (held_job_adopted); otherwise it is busy closing that job until it releases
  // it, and must stop it.
  // With id_from_credentials (mutual TLS: the handler put the client certificate's identity in
  // request.worker_id()), that id is used as is, never a fresh one: FAILED_PRECONDITION while
  // another registration of it holds a live lease.
  Result<v1::RegisterResponse> Register(const v1::RegisterRequest& request, bool id_from_credentials = false);
  Result<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);
  // The lease now: CoordinatorOptions::lease, grown with the registered workers
  // (max_heartbeats_per_s).
  std::chrono::milliseconds Lease() const { return std::chrono::milliseconds(lease_ms_.load(std::memory_order_relaxed)); }
  // Moves the worker's pending commands to `out`, waiting up to `deadline` for one.
  // NOT_FOUND if the worker is unknown (lease lost: it must register again).
  Status WaitCommands(const std::string& worker_id, std::vector<v1::WorkerCommand>* out,
                      Clock::time_point deadline);
  // Puts commands WaitCommands handed out but the stream could not deliver back at the front of
  // the worker's queue, in order (nothing if the worker is gone).
  void ReturnCommands(const std::string& worker_id, std::vector<v1::WorkerCommand> commands);
  Status ReportResult(const v1::ReportResultRequest& request);
  // The worker closed every link of the job it held (job, session): it is free for the next one.
  // A release of an older hold changes nothing. NOT_FOUND if the worker is unknown.
  Status ReleaseJob(const v1::ReleaseJobRequest& request);
  // Forgets the worker now (it is shutting down). A job it still holds fails naming its rank, or,
  // when no rank has measured anything yet, goes back to the queue (as when a lease runs out).
  // NOT_FOUND if it is not registered.
  Status Deregister(const std::string& worker_id);
  // The worker is shutting down while it runs its job (SIGTERM): every rank of the job is told to
  // stop after one step, the same for all (a step no rank can have passed: one after the furthest
  // any has reported), checkpointing it; once all have, the job goes back to the queue from that
  // checkpoint, no restart counted. Only for jobs that save checkpoints (others answer -1: the
  // worker stops after its current step, as before), on either kind of worker. NOT_FOUND for an
  // unknown worker; PERMISSION_DENIED when it does not hold that attempt.
  Result<v1::DrainResponse> Drain(const v1::DrainRequest& request);
  // PERMISSION_DENIED when the worker does not hold that job and rank; INVALID_ARGUMENT when the
  // batch breaks the order of a rank's reports (steps in order, each once; at most the rank's job
  // list of actions per step). A refused batch changes nothing.
  Status IngestTelemetry(const v1::TelemetryBatch& batch, v1::TelemetryAck* ack);
  // Several streams' batches at once (service.cc's ingest thread takes every batch queued since
  // its last round): each answered as IngestTelemetry would (status, ack), the accepted ones
  // stored in one write. The core lock is let go while the round's rows are stored and their
  // per-batch checks run, and while its events and step records are written: other calls do
  // not wait for the disk (or etcd). One round at a time. A rank's second batch in one round is
  // not taken (deferred: the caller passes it again in the next round).
  struct TelemetryIn {
    const v1::TelemetryBatch* batch = nullptr;
    v1::TelemetryAck* ack = nullptr;
    Status status;
    bool deferred = false;
  };
  void IngestTelemetryRound(std::vector<TelemetryIn>* round);
  // IngestTelemetry if no round is running and the core lock is free now (*status its answer);
  // false, doing nothing, otherwise. Once begun it waits for the core lock to count the batch.
  bool TryIngestTelemetry(const v1::TelemetryBatch& batch, v1::TelemetryAck* ack, Status* status);
  // Actions of every accepted telemetry batch since start (what the acks counted).
  int64_t ActionsIngested() const;
  // Key-value exchange with a barrier: stores value (if any) under (job, key), then waits until
  // `expected` workers have put a value, and returns them all.
  Result<v1::RendezvousResponse> Rendezvous(const std::string& worker_id,
                                            const v1::RendezvousRequest& request,
                                            Clock::time_point deadline);

  // --- The same waits without a thread each (coordinator/service.cc's reactors) ---
  // `ready` is called on the coordinator's wakeup thread (stream_wakeups.h), outside its lock,
  // whenever the worker's commands may have changed (queued, the worker gone, shutdown); the
  // subscriber takes them with WaitCommands(worker, out, Clock::now()), which then never blocks.
  // Only that worker's subscribers wake.
  uint64_t SubscribeCommands(const std::string& worker_id, std::function<void()> ready);
  // The same for a job's updates (WaitJobUpdates with the deadline now).
  uint64_t SubscribeJobUpdates(const std::string& job_id, std::function<void()> ready);
  // After it returns the token's `ready` is neither running nor called again.
  void Unsubscribe(uint64_t token);
  // Rendezvous with a callback: `done` is called once, outside the coordinator's lock, with what
  // Rendezvous would return: at once (an error, or this worker was the last one expected), from
  // the RendezvousAsync of the worker that completes the key, or from Tick once `deadline` passed
  // or the job ended, or from Shutdown.
  using RendezvousDone = std::function<void(Result<v1::RendezvousResponse>)>;
  void RendezvousAsync(const std::string& worker_id, const v1::RendezvousRequest& request,
                       Clock::time_point deadline, RendezvousDone done);
  // Streams subscribed now, and the wakeups they got (the load benchmark's figures).
  size_t stream_subscriptions() const { return wakeups_.subscriptions(); }
  int64_t stream_wakeups() const { return wakeups_.wakeups(); }

  // Expires leases (failing their jobs), ends re-adoptions past their grace, takes finished jobs'
  // series off /metrics after options.metrics_retention, and runs the jobs' timed health checks
  // (the hang check); the server calls it every TickPeriod(lease).
  void Tick();
  // Wakes every waiter so streaming handlers can end (server shutdown).
  void Shutdown();

 private:
  void TryDispatchLocked();
  // Ends the job; a failure with restarts left (spec.max_restarts) restarts it instead, unless
  // `restart` is false.
  void FinishJobLocked(JobRecord& job, v1::JobState state, const std::string& cause, int rank, bool restart = true);
  void RestartJobLocked(JobRecord& job, const std::string& cause);
  // Stops the attempt (its workers told to stop; each rank goes back to its worker when that one
  // is free), forgets what it measured from `from` on, and queues the job to start there; `event`
  // records why.
  void QueueAgainLocked(JobRecord& job, int from, const std::string& event);
  // A restarting ZeRO job (spec.recovery "auto") that finds `free` workers, a replica's worth short
  // of its world: re-planned with one replica fewer at the same global batch, its checkpoint
  // resharded by the workers (Job.checkpoint_dp), and true; false (nothing changed) otherwise.
  bool RestartSmallerLocked(JobRecord& job, int free);
  // A worker of the job is gone (shut down, lease lost, silent to its peers): the job goes back to
  // the queue when no rank has measured anything yet (a few times at most); else a spare takes
  // the lost rank over in place when it can (RecoverInPlaceLocked), or the job fails (the restart
  // policy applies). `worker`: the lost worker's id (empty: not known).
  void LoseWorkerLocked(JobRecord& job, const std::string& why, int rank, const std::string& worker = "");
  // In-place recovery (docs/operations.md, "a lost rank"): `worker`, which holds a rank of the
  // running job, is lost. When the job can recover in place (jobplan::InPlaceRecoveryRefusal)
  // and a free worker with room is there (a spare), the spare takes the rank, the other ranks are
  // halted, and the job resumes once all of them stopped (ResumeInPlaceLocked). False: the
  // caller applies the restart policy; an event says why.
  bool RecoverInPlaceLocked(JobRecord& job, const std::string& worker, const std::string& why);
  // Once every other rank stopped: the resume step from their commit states, the lost rank's
  // step records completed up to it, the recover commands and the spare's assignment sent.
  void ResumeInPlaceLocked(JobRecord& job);
  // No spare was free: the job goes on at `resume` with one replica fewer (JobRecord::Recovery's
  // shrunk spec and plan): the lost replica's workers let go, the others' new places and plan
  // sent, the telemetry and checks restarted for the new layout.
  // A worker of the running attempt whose part is over while the attempt goes on (a shrink's
  // lost replica, a lost worker still alive): told to stop, free once it releases, and nothing it
  // reports or sends counts any more.
  void LetGoLocked(JobRecord& job, const std::string& worker);
  // Ends the job's in-place recovery, however it ends. A recovery that never resumed frees the
  // workers held for it but never told (the spare, a growing replica's workers: their
  // assignments go out only once every other rank stopped): no release would ever come from them.
  void EndRecoveryLocked(JobRecord& job);
  // Global rank g of an attempt found running after a restart is accounted for (back holding
  // it, or its part over); the last one ends the adoption.
  void AdoptedLocked(JobRecord& job, int g);
  // The next data-plane generation of the attempt, resuming at `resume`, its peers the data
  // endpoints of `workers` (by global rank; also appended to *endpoints).
  v1::Recovery NextGenerationLocked(JobRecord& job, int resume, const std::vector<std::string>& workers,
                                    std::vector<std::string>* endpoints);
  void ShrinkLocked(JobRecord& job, int resume);
  // A job a shrink left smaller, RUNNING, with enough free workers for one more replica: those
  // workers are held for it and every rank is told to stop after the same step
  // (StopStepLocked), then GrowLocked (from ResumeInPlaceLocked) changes the plan there.
  // A ZeRO job cannot grow in place (a new replica changes every replica's moment shard, which no
  // rank holds): every rank stops after a step and checkpoints it, then GrowFromCheckpointLocked
  // queues the job again at the grown spec from that checkpoint, the workers resharding it.
  void MaybeGrowLocked(JobRecord& job);
  void GrowLocked(JobRecord& job, int resume);
  void GrowFromCheckpointLocked(JobRecord& job);
  // Shrink's and grow's common end: the job's spec and plan become JobRecord::Recovery's, its
  // workers `workers` (by new global rank), its telemetry and checks start again at `resume`; the
  // ranks already running get their new place (ResumeInPlace.reshaped), the ranks in state_from
  // (new rank -> the rank streaming it its stage's state) a fresh assignment.
  void ChangePlanInPlaceLocked(JobRecord& job, int resume, const std::vector<std::string>& workers,
                               const std::map<int, int>& state_from);
  // A rank's batch that passed the order check: stored, accepted, measured; `health`: through
  // the online checks too (not for step records a recovery completes for a lost rank).
  Status AcceptBatchLocked(JobRecord& job, int g, const v1::TelemetryBatch& batch, bool health);
  // One telemetry round (ingest_mu_ held): admitted under mu_, stored and checked outside it,
  // counted under it, the steps it measured checked outside it (their events recorded under it),
  // its events and step records written outside it. With `try_core`, false
  // (nothing done) when mu_ is taken at the start.
  bool RunIngestRound(std::vector<TelemetryIn>* round, bool try_core);
  // AcceptBatchLocked once the batch is stored. `checked`: the events the batch's checks raised
  // already (RunIngestRound ran them outside the lock), or null to run them here.
  void CountBatchLocked(JobRecord& job, int g, const v1::TelemetryBatch& batch, bool health,
                        std::vector<v1::HealthEvent>* checked = nullptr);
  // Whether a rank's batch may be stored: its job and global rank, or why not; *stored_before: a
  // step this rank already summarized (sent again after a cut stream: acknowledged, not stored);
  // *deferred: the rank is in `in_round` (may be null), its order not judged yet.
  Status AdmitTelemetryLocked(const v1::TelemetryBatch& batch, JobRecord** job, int* global_rank, bool* stored_before,
                              const std::set<std::pair<JobRecord*, int>>* in_round, bool* deferred);
  // When `from` is past the job's last step (every step checkpointed on every rank), a new attempt
  // would have nothing to run: its ranks would start only to exit at once, racing their peers'
  // connects (a requeue loop the soak found). Ends the job SUCCEEDED instead, saying `why` it
  // would have started again, and returns true; false (nothing done) otherwise.
  bool FinishCheckpointedLocked(JobRecord& job, int from, const std::string& why);
  // Marks the job's workers closing (free once they release it), telling them to stop it when
  // `cancel`.
  void ReleaseWorkersLocked(JobRecord& job, bool cancel);
  void NoteCheckpointLocked(JobRecord& job, int global_rank, int step);
  // A coordinated stop: every rank of the job's attempt is told to stop after one step
  // (StopStepLocked, at most the last) and checkpoint it. `asked_by`: the worker shutting down
  // (empty: the coordinator); `then`: what follows once every rank stopped there. Returns that step.
  int StopEveryRankAfterAStepLocked(JobRecord& job, const std::string& asked_by, AfterStop then);
  // The step a coordinated stop names (a drain, a cancel with checkpoint, growing back): one no
  // rank can have passed when a command sent now arrives. Not capped at the job's last step.
  int StopStepLocked(const JobRecord& job) const;
  // Queues `command` to the worker of every rank of the job's attempt that still holds it, but
  // the ranks `skip` names.
  void TellEveryRankLocked(JobRecord& job, const v1::WorkerCommand& command, const std::function<bool(int g)>& skip = nullptr);
  // A step every rank has reported: checked (calibration, idle split, step checks) and recorded
  // (stored, streamed, exported), in step order. `actions`: each global rank's actions of the
  // step. In an ingest round (step_checks_ set) a whole step is queued (JobRecord::step_queue)
  // for the round to check outside the core lock; a step behind a queued one waits for it.
  void StepMeasuredLocked(JobRecord& job, v1::StepRecord record, jobplan::StepActions actions);
  // Records the job's queued steps from the front up to the first one still out with a round.
  void RecordQueuedStepsLocked(JobRecord& job);
  // Records one step: its checks run here unless a round ran them (q.checked_by); a round's
  // calibration and events apply only if the attempt it checked with is still the job's.
  void RecordStepLocked(JobRecord& job, QueuedStep&& q);
  // Drops the oldest finished jobs until at most `keep` are stored; RESOURCE_EXHAUSTED when the
  // rest are all live.
  Status MakeRoomLocked(size_t keep);
  void PublishLocked(JobRecord& job, v1::JobUpdate update);
  void RecordEventLocked(JobRecord& job, const std::string& event);
  void RecordHealthEventLocked(JobRecord& job, v1::HealthEvent event);
  // RendezvousAsync's waiters: completed (their `done` queued in *ready with the answer) when
  // their key is complete, their deadline passed (now) or their job ended or went away.
  struct RendezvousWaiter {  // of the (job, key) it is kept under
    int expected = 0;
    Clock::time_point deadline;
    RendezvousDone done;
  };
  using ReadyRendezvous = std::vector<std::pair<RendezvousDone, Result<v1::RendezvousResponse>>>;
  // Answers the waiters whose key has its values, or whose deadline passed or job ended: those of
  // one (job, key) after a put there; every key's at a tick or shutdown.
  using RendezvousWaiters = std::map<std::pair<std::string, std::string>, std::vector<RendezvousWaiter>>;
  void SettleRendezvousLocked(Clock::time_point now, ReadyRendezvous* ready);
  // One key's; returns the next key's entry (this one is erased once none waits).
  RendezvousWaiters::iterator SettleRendezvousKeyLocked(RendezvousWaiters::iterator key, Clock::time_point now,
                                                        ReadyRendezvous* ready);
  void TickLocked(ReadyRendezvous* ready);  // Tick's work under the lock
  // The heartbeats recorded in beats_ since the last call: leases renewed from the time each
  // arrived, progress handed to the hang check.
  void ApplyBeatsLocked();
  // Validates and stores a rendezvous put; the job on success.
  Result<JobRecord*> PutRendezvousLocked(const std::string& worker_id, const v1::RendezvousRequest& request);
  v1::RendezvousResponse RendezvousAnswerLocked(JobRecord& job, const std::string& key) const;
  JobRecord* FindJobLocked(const std::string& job_id) const;
  // Restore: a RUNNING attempt's telemetry order and partly measured steps from its stored batches.
  void ResumeAttemptLocked(JobRecord& job, const std::vector<StoredBatch>& rows);
  int64_t NowNs() const;

  CoordinatorOptions options_;
  StateWriter state_;  // every change, written through to options_.store (its own lock)
  // One telemetry round at a time (the ingest thread's, or a gRPC thread's inline one): a round
  // lets go of mu_ while it stores and checks, and each rank's next batch must wait for it.
  // Taken before mu_, never while holding it.
  std::mutex ingest_mu_;
  mutable std::mutex mu_;
  // A step measured in an ingest round, for the checks the round runs after letting go of mu_
  // (JobMonitor::OnStepMeasured, OnStepDone): its job and the QueuedStep that comes back to its
  // place (same id) in the job's step_queue. Defined in coordinator.cc.
  struct StepCheck;
  // Set while an ingest round counts (under mu_): StepMeasuredLocked leaves the whole steps
  // there, for their checks, instead of running them.
  std::vector<StepCheck>* step_checks_ = nullptr;
  mutable std::condition_variable changed_;
  bool shutdown_ = false;
  IdCounters ids_;
  int64_t actions_ingested_ = 0;
  std::vector<std::unique_ptr<JobRecord>> jobs_;          // submission order
  WorkerRegistry workers_;
  // Heartbeats land here first, never waiting for mu_ (lease_board.h); ApplyBeatsLocked renews
  // the registry's leases from them. The epoch a heartbeat answers, readable without mu_.
  LeaseBoard beats_;
  // The schedule shapes schedule "auto" built, kept for the next submission (thread-safe, read
  // outside mu_): a dry run's search makes the submission that follows it quick. A few KB a
  // shape, never evicted; shapes depend on (schedule, pp, vpp, micro-batches) only.
  planner::ScheduleCache schedule_shapes_;
  // Lease() in ms, written under mu_ (UpdateLeaseLocked) and read by Heartbeat without it.
  std::atomic<int64_t> lease_ms_;
  // The lease for `workers` registered workers (CoordinatorOptions::max_heartbeats_per_s), set
  // on the registry (each renewal runs the lease then current) and in lease_ms_.
  void UpdateLeaseLocked(size_t workers);
  std::atomic<uint64_t> epoch_{1};
  // Waiting rendezvous calls by (job, key): a put looks only at its own key's waiters (one list
  // for all made every put scan every waiter, quadratic when thousands of ranks rendezvous).
  RendezvousWaiters rendezvous_waiters_;
  // Wakes the reactors' streams, keyed "worker/ID" and "job/ID"; last, so it stops (its thread
  // joined) before anything its callbacks could reach goes.
  StreamWakeups wakeups_;
};

// How often the server calls Coordinator::Tick: lease / 8 (a lost lease is seen within 1/8 of
// it), at most 200 ms so that a hang is seen within deadline + 200 ms of the rank's last
// progress whatever the lease (docs/monitoring.md), at least 25 ms.
constexpr std::chrono::milliseconds TickPeriod(std::chrono::milliseconds lease) {
  return std::chrono::milliseconds(std::clamp<int64_t>(lease.count() / 8, 25, 200));
}

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_COORDINATOR_H_
