// StateWriter: the Coordinator's changes, written through to its StateStore (--state) before
// they are acknowledged; with no store (state in memory only) every call does nothing and
// succeeds. The calls that return a Status are those whose change the caller refuses when it is
// not stored (UNAVAILABLE "... not stored: <why>"); the others log a failure to stderr and go on,
// the change staying in memory. It also keeps each job's telemetry rows in the file bounded: the
// newest rows holding trace_actions_per_job actions, older ones dropped in chunks.
//
// Thread-safe: every call that reaches the store takes the writer's own lock, so the Coordinator
// stores an ingest round's telemetry rows, and writes the events and step records that round
// queued, outside its core lock while other changes come in under it. Writes reach the store in
// the order they were made: a write first stores whatever rounds queued before it. Rounds
// (BeginRound .. EndRound) belong to the core lock's holder.
#ifndef PIPECOORD_COORDINATOR_STATE_WRITER_H_
#define PIPECOORD_COORDINATOR_STATE_WRITER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "coordinator/state_store.h"
#include "proto/health.pb.h"
#include "proto/job.pb.h"
#include "proto/telemetry.pb.h"

namespace pipecoord::coordinator {

// The next job, worker and session numbers: stored with every job and worker row.
struct IdCounters {
  uint64_t next_job = 1, next_worker = 1, next_session = 1;
  uint64_t epoch = 1;  // this coordinator's (RegisterResponse.epoch)
};

class StateWriter {
 public:
  // `store` may be null; not owned.
  StateWriter(StateStore* store, size_t trace_actions_per_job);

  bool enabled() const { return store_ != nullptr; }
  std::string where() const;  // StateStore::where() ("" without a store)
  // Everything stored (StateStore::Load); then NoteStoredTelemetry for each job's rows.
  Result<StoredState> Load(std::vector<std::vector<std::string>>* events_by_job);
  void NoteStoredTelemetry(const std::string& job_id, int64_t seq, int actions);
  // What a stored batch counts toward the window: its records (whole actions and folded totals),
  // at least 1 so that summary-only batches (a tp speaker's group) leave the window too.
  static int WindowWeight(const v1::TelemetryBatch& b) { return std::max(1, b.actions_size() + b.totals_size()); }

  // A job's row with the counters. PutNewJob (a submission) refuses, PutJob logs.
  Status PutNewJob(const v1::Job& job, const IdCounters& ids);
  void PutJob(const v1::Job& job, const IdCounters& ids);
  Status PutWorker(const std::string& worker_id, const IdCounters& ids);
  // The counters alone (the epoch, at Restore).
  Status PutCounters(const IdCounters& ids);
  // Stored at once, or inside a round (BeginRound .. EndRound: an ingest round, a tick) queued
  // and stored with the round's other events in one write when it ends (a storm of events at
  // thousands of ranks was one committed write each, under the core lock). An event is no
  // acknowledgement: a crash inside a round loses at most that round's events.
  void AppendEvent(const std::string& job_id, const v1::HealthEvent& event);
  // Rounds nest; the outermost EndRound stores what they queued, unless it was begun `deferred`:
  // then what they queued waits for Flush (or the next write), which the caller makes once it
  // has let go of its core lock.
  void BeginRound(bool deferred = false);
  void EndRound();
  // Stores what rounds queued (in order; a failure is logged and the queue dropped, as a failed
  // event write always was).
  void Flush();
  class Round {
   public:
    explicit Round(StateWriter* w, bool deferred = false) : w_(w) { w_->BeginRound(deferred); }
    ~Round() { w_->EndRound(); }
    Round(const Round&) = delete;
    Round& operator=(const Round&) = delete;

   private:
    StateWriter* w_;
  };
  // Only the step record: steps_done is their count, derived again on restore, so the job's row
  // (its plan can be megabytes) is not rewritten at every step. Queued inside a round, as events.
  void AppendStep(const std::string& job_id, const v1::StepRecord& step);
  void PutCheckpointedSteps(const std::string& job_id, int n);
  // Stored before it counts (and before the ack): nothing acknowledged is lost to a crash.
  Status AppendTelemetry(const std::string& job_id, const v1::TelemetryBatch& batch);
  // Several, in one write where the store can (StateStore::AppendTelemetryRows): OK when every
  // row is stored; else the error. *stored: how many rows, from the first, are stored either way
  // (SQLite: all or none; etcd: those before the failure). The rows of a job deleted meanwhile
  // (the caller stores outside its lock) are left out and count as stored: the caller, admitting
  // them again, finds the job gone.
  Status AppendTelemetryRows(const std::vector<TelemetryRow>& rows, size_t* stored);
  // Removes the job and everything kept with it, its queued events and steps too (the store's
  // error, as is).
  Status DeleteJob(const std::string& job_id);

 private:
  // A job's telemetry rows in the file, oldest first: (seq, actions). Rows before the window are
  // dropped in chunks of kRowsPerDrop.
  struct Window {
    std::deque<std::pair<int64_t, int>> rows;
    int64_t actions = 0;
    int rows_to_drop = 0;
  };
  static constexpr int kRowsPerDrop = 256;  // one DELETE per 256 rows, not one per row

  // A write a round queued: a job's event (serialized) or step record.
  struct Queued {
    std::string job_id;
    std::string event_bytes;
    std::optional<v1::StepRecord> step;
  };

  void Log(const Status& st) const;
  void NoteStoredTelemetryLocked(const std::string& job_id, int64_t seq, int actions);
  void FlushLocked();

  StateStore* const store_;
  const size_t trace_actions_per_job_;
  // The core lock's holder's (rounds are begun and ended under it).
  int round_depth_ = 0;
  bool deferred_ = false;  // the outermost round was begun deferred
  std::mutex mu_;          // the store's calls and everything below
  std::map<std::string, Window> windows_;  // by job id
  std::set<std::string> jobs_;             // stored and not deleted (Load, PutNewJob, PutJob)
  std::vector<Queued> queued_;             // in order
};

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_STATE_WRITER_H_
