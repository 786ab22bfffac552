// StateStore: the coordinator's durable state: by default one SQLite file (WAL mode), or etcd for
// coordinators in high availability. Every write is committed before it returns, so whatever the
// coordinator acknowledged to a client survives a SIGKILL; Load() gives it all back on restart.
//
// What is kept: jobs (spec, plan, state, cause, steps done, creation time), their events and
// step records, the telemetry batches accepted (as serialized TelemetryBatch rows, of which the
// caller drops the old ones: DropTelemetryBefore), each job's checkpointed steps, the worker
// identities handed out, and the id counters (with the epoch).
#ifndef PIPECOORD_COORDINATOR_STATE_STORE_H_
#define PIPECOORD_COORDINATOR_STATE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/job.pb.h"
#include "proto/telemetry.pb.h"

namespace pipecoord::coordinator {

struct StoredBatch {
  int64_t seq = 0;  // the row's place in arrival order (what DropTelemetryBefore takes)
  v1::TelemetryBatch batch;
};

// A telemetry batch to store for a job (pointers: the caller keeps both alive through the call).
struct TelemetryRow {
  const std::string* job_id;
  const v1::TelemetryBatch* batch;
};

struct StoredState {
  std::vector<v1::Job> jobs;  // submission order; events, steps and checkpointed_steps filled in
  std::vector<std::vector<StoredBatch>> telemetry;  // per job, in arrival order
  std::vector<std::string> worker_ids;
  uint64_t next_job = 1, next_worker = 1, next_session = 1;
  uint64_t epoch = 0;  // the last coordinator's (it grows at every Restore)
};

// What every store keeps and gives back; the SQLite file below is the embedded default, etcd
// (coordinator/ha/etcd_state_store.h) the high-availability one. Not thread-safe: the Coordinator's
// StateWriter calls a store under its own lock. Every call returns once its change is durable (or with the
// reason it is not).
class StateStore {
 public:
  // The SQLite file: opens (creating if needed) the file and its schema, and holds an exclusive
  // lock on it until destroyed: one coordinator per state file. FAILED_PRECONDITION naming the path
  // (and the process holding it, when /proc tells) when another store has it open; UNAVAILABLE
  // naming the path when it cannot be opened or is not a pipecoord state file.
  static Result<std::unique_ptr<StateStore>> Open(const std::string& path);
  virtual ~StateStore() = default;

  // Inserts or replaces the job's row (not its events, steps or telemetry).
  virtual Status PutJob(const v1::Job& job) = 0;
  virtual Status AppendEvent(const std::string& job_id, const std::string& event_bytes) = 0;
  // Several events (job id, bytes) in order. Where the store can, one write for all (SQLite: one
  // transaction); by default one by one, stopping at the first that fails.
  virtual Status AppendEvents(const std::vector<std::pair<std::string, std::string>>& events);
  virtual Status AppendStep(const std::string& job_id, const v1::StepRecord& step) = 0;
  // Returns the new row's seq (growing in arrival order).
  virtual Result<int64_t> AppendTelemetry(const std::string& job_id, const v1::TelemetryBatch& batch) = 0;
  // Several rows in order: *seqs gets the seq of each one stored. Where the store can, one write
  // for all (SQLite: one transaction: all stored or, with the error, none); by default one by one,
  // stopping at the first that fails (those before it stay stored, their seqs given).
  virtual Status AppendTelemetryRows(const std::vector<TelemetryRow>& rows, std::vector<int64_t>* seqs);
  // Deletes the job's telemetry rows older than `seq`: the coordinator keeps a bounded window.
  virtual Status DropTelemetryBefore(const std::string& job_id, int64_t seq) = 0;
  // Steps [0, n) are checkpointed on every rank (Job.checkpointed_steps): kept apart from the job
  // row, which holds the plan and is not rewritten for it.
  virtual Status PutCheckpointedSteps(const std::string& job_id, int n) = 0;
  virtual Status PutWorker(const std::string& worker_id) = 0;
  virtual Status PutCounters(uint64_t next_job, uint64_t next_worker, uint64_t next_session, uint64_t epoch = 0) = 0;
  // Removes a job and everything kept with it.
  virtual Status DeleteJob(const std::string& job_id) = 0;

  // Everything stored. Events are returned as the bytes AppendEvent was given.
  virtual Result<StoredState> Load(std::vector<std::vector<std::string>>* events_by_job) = 0;

  // Where the state is, for messages: "state file PATH", "etcd HOST:PORT,... under PREFIX".
  virtual std::string where() const = 0;
};

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_STATE_STORE_H_
