// JobRecord: one job as the Coordinator holds it. The Job (spec, plan, state, steps, events, its
// workers by global rank), the WatchJob log, the current attempt (session, results, telemetry
// order, steps being measured), what outlives an attempt (each rank's last checkpoint, the previous
// attempt's workers, requeues), the measured actions kept for the trace, rendezvous values and
// the online checks. No lock, no I/O: the Coordinator changes it under its own lock and writes
// the changes through (StateWriter).
#ifndef PIPECOORD_COORDINATOR_JOB_RECORD_H_
#define PIPECOORD_COORDINATOR_JOB_RECORD_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "coordinator/attempt_outcome.h"
#include "coordinator/health/job_monitor.h"
#include "coordinator/step_aggregator.h"
#include "coordinator/telemetry_order.h"
#include "jobplan/layout.h"
#include "proto/job.pb.h"
#include "proto/telemetry.pb.h"
#include "proto/worker.pb.h"

namespace pipecoord::coordinator {

// What follows a coordinated stop once every rank stopped: resume (a worker's drain), end
// CANCELLED (the user's cancel --checkpoint), or resume under grow_spec / grow_plan (a ZeRO job
// growing back).
enum class AfterStop { kResume, kCancel, kGrow };

// The step aggregator for a job of `spec`'s layout and telemetry detail (its tp speakers, one
// replica's ranks).
StepAggregator MeasuringFor(const v1::JobSpec& spec);

// Steps measured and not recorded yet, in step order (Coordinator::StepMeasuredLocked): a step
// an ingest round checks outside the core lock (its calibration, idle split and step checks)
// holds its place (`out`) until the round brings it back; a step measured behind it waits here,
// so the job's records keep their order.
struct QueuedStep {
  uint64_t id = 0;
  bool out = false;  // with the round's checks
  // Every rank's timings are there (not a step a recovery completed for a lost rank): checked.
  bool whole = false;
  v1::StepRecord record;
  jobplan::StepActions actions;  // for checks still to run at recording
  // Set when a round checked it: the monitor it was checked with, whether it calibrated the
  // job, and the events the checks raised.
  std::shared_ptr<health::JobMonitor> checked_by;
  bool calibrated = false;
  std::vector<v1::HealthEvent> events;
};

struct JobRecord {
  int world() const { return jobplan::LayoutOf(job.spec()).world(); }
  bool terminal() const;
  // Forgets an attempt's progress: the next one reports from `from_step` on.
  void ResetAttempt(int from_step);
  // Drops the step records from `from` on (a stopped attempt's, when the next starts there), the
  // queued ones too, and recounts steps_done.
  void DropStepsFrom(int from);
  // Global rank `g` has a checkpoint of `step`. True when the steps covered on every rank
  // (Job.checkpointed_steps, the restart point) grew.
  bool NoteCheckpoint(int g, int step);
  // Global rank `g` of the current attempt has sent (and this coordinator or its predecessor
  // stored) its telemetry of every step: a worker reports its result only after that, so a rank
  // whose result was heard by a predecessor that died is known done.
  bool MeasuredEveryStep(int g) const { return order.open_step(g) >= job.spec().steps(); }
  // Keeps a measured action of global rank `g` for the trace: the newest `cap`, dropping the
  // oldest half at once when full (amortised O(1) per action).
  void KeepAction(const v1::ActionTiming& action, int g, size_t cap);
  // Keeps only the newest `cap` actions.
  void TrimActions(size_t cap);
  // The WatchJob update of a measured step.
  v1::JobUpdate StepUpdate(const v1::StepRecord& record) const;

  v1::Job job;
  std::vector<v1::JobUpdate> updates;  // the WatchJob log
  // The online checks; shared: an ingest round runs a batch's checks outside the core lock and
  // keeps the monitor it checked with (a new attempt gets a new one meanwhile).
  std::shared_ptr<health::JobMonitor> monitor;

  // The current attempt.
  uint64_t session = 0;
  AttemptOutcome outcome;    // the ranks' results
  TelemetryOrder order;      // each rank's telemetry
  StepAggregator measuring;  // steps not every rank has reported yet (MeasuringFor the spec)
  std::map<std::string, std::map<std::string, std::string>> rendezvous;  // key -> worker -> value
  // A RUNNING attempt a restarted coordinator found in its state: it waits until `adopt_deadline`
  // for each rank's worker to register again holding it (adopted, by global rank).
  // A coordinated graceful stop of this attempt (Drain): every rank stops after drain_step (-1:
  // none), asked by drain_worker; the ranks that reported stopping there (by global rank).
  int drain_step = -1;
  std::string drain_worker;  // empty: the user's cancel --checkpoint
  // What follows once every rank stopped there (AfterStop).
  AfterStop drain_then = AfterStop::kResume;
  v1::JobSpec grow_spec;
  v1::Plan grow_plan;
  std::vector<bool> drained;
  bool adopting = false;
  std::chrono::steady_clock::time_point adopt_deadline;
  std::vector<bool> adopted;
  // In-place recovery of a lost rank (docs/operations.md, "a lost rank"): the attempt goes on,
  // the lost rank on a spare. `states`: the commit states of the ranks that stopped and wait for
  // it (ReportResultRequest.awaiting_recovery), by global rank, kept from before it begins (a
  // survivor may report before the coordinator knows which rank is lost).
  struct Recovery {
    bool active = false;
    int lost = -1;  // global rank
    std::string lost_worker, spare, why;
    std::string lost_name;  // the lost rank in the layout it was lost from (RankLayout::Name)
    std::chrono::steady_clock::time_point began, deadline;
    int resume_step = -1;  // decided once every survivor stopped; -1: not yet
    bool recomputes = false;  // some rank had begun the step it resumes at
    // No spare: the job goes on with one data-parallel replica fewer, at the same global batch,
    // under this spec (dp - 1, more micro-batches per replica) and plan.
    bool shrink = false;
    v1::JobSpec shrunk_spec;
    v1::Plan shrunk_plan;
    // Growing back (no rank lost: lost is -1): workers returned for the replica a shrink let go;
    // they take the new replica's ranks under shrunk_spec/shrunk_plan (the grown ones).
    bool grow = false;
    std::vector<std::string> joining;  // the new replica's workers, by pipeline rank
  };
  Recovery recovery;
  // What a shrink left the job: the replicas and ZeRO stage it grows back to when workers return
  // (grow_dp 0: never shrunk, or grown back; the global batch is kept, so the micro-batches follow
  // from dp). Kept in memory only: after a coordinator restart a shrunk job stays at its size.
  int grow_dp = 0, grow_zero = 0;
  std::map<int, v1::CommitState> awaiting;
  int generation = 0;  // recoveries of this attempt: its data plane's generation
  // The attempt's ranks run the step commit (jobplan::RunsStepCommit of the spec they started
  // with; a shrink in place keeps it): only then can they stop together to grow in place.
  bool commits = false;

  // Over all attempts.
  // Restart policy: the last step each global rank checkpointed (-1: none).
  std::vector<int> last_checkpoint;
  // The previous attempt's worker of each global rank: a restart gives a rank back to its worker
  // when that worker is free, so a checkpoint on a worker's own disk is found again (a
  // StatefulSet's replacement pod keeps its name, hence its worker id, and its volume).
  std::vector<std::string> previous_workers;
  int requeues = 0;  // times a lost worker sent it back to the queue before its first step
  // A failure message its ranks reported -> the workers that reported it (kSameFailureWorkers).
  std::map<std::string, std::set<std::string>> failed_on;
  std::string waiting_reason;
  bool metrics_forgotten = false;  // finished, and its series left /metrics (metrics_retention)  // the last "waiting for workers with room" event, said once

  std::vector<v1::ActionTiming> actions;  // measured, for the trace (bounded)
  std::vector<int> action_rank;           // global rank of each entry in `actions`

  // Steps measured and not recorded yet, in step order (QueuedStep); DropStepsFrom drops these
  // too.
  std::deque<QueuedStep> step_queue;
  uint64_t queued_steps = 0;  // ids given
};

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_JOB_RECORD_H_
