// EtcdStateStore: the coordinator's state (StateStore) in etcd, for coordinators in high
// availability: whichever coordinator etcd elects loads it and goes on from it.
//
// Layout, under `prefix` (e.g. "/pipecoord/default/state/"):
//   counters                 "next_job next_worker next_session epoch"
//   job/<id>                 the job row (as the SQLite file's; submission order = create revision)
//   event/<id>/<seq>         step/<id>/<seq>          tele/<id>/<seq>   (seq: 20 digits, growing)
//   ckpt/<id>                checkpointed steps        worker/<id>       ""
// Every write is one etcd transaction guarded by the writer's election key (EtcdLeadership): a
// coordinator that lost its election (paused past its lease, cut off) writes nothing, and
// `on_lost` runs so that it stops serving. Values must fit etcd's --max-request-bytes (plans of
// large jobs: raise it; the manifests set 64 MiB).
//
// Not thread-safe, as StateStore: the Coordinator calls it under its lock.
#ifndef PIPECOORD_COORDINATOR_HA_ETCD_STATE_STORE_H_
#define PIPECOORD_COORDINATOR_HA_ETCD_STATE_STORE_H_

#include <functional>
#include <memory>
#include <string>

#include "coordinator/ha/etcd_client.h"
#include "coordinator/state_store.h"

namespace pipecoord::coordinator::ha {

class EtcdStateStore final : public StateStore {
 public:
  // `client` and `guard` must outlive the store; `guard` may be null (unguarded writes: tests and
  // single-coordinator use). `on_lost` (may be empty) runs once, on the first write refused
  // because the guard no longer holds.
  EtcdStateStore(EtcdClient* client, std::string prefix, const EtcdLeadership* guard,
                 std::function<void(const Status&)> on_lost);

  Status PutJob(const v1::Job& job) override;
  Status AppendEvent(const std::string& job_id, const std::string& event_bytes) override;
  Status AppendStep(const std::string& job_id, const v1::StepRecord& step) override;
  Result<int64_t> AppendTelemetry(const std::string& job_id, const v1::TelemetryBatch& batch) override;
  Status DropTelemetryBefore(const std::string& job_id, int64_t seq) override;
  Status PutCheckpointedSteps(const std::string& job_id, int n) override;
  Status PutWorker(const std::string& worker_id) override;
  Status PutCounters(uint64_t next_job, uint64_t next_worker, uint64_t next_session, uint64_t epoch) override;
  Status DeleteJob(const std::string& job_id) override;
  // Also sets the next seq past every stored one.
  Result<StoredState> Load(std::vector<std::vector<std::string>>* events_by_job) override;
  std::string where() const override;

 private:
  Status Write(std::vector<EtcdOp> ops);
  std::string SeqKey(const char* kind, const std::string& job_id, int64_t seq) const;

  EtcdClient* client_;
  std::string prefix_;
  const EtcdLeadership* guard_;
  std::function<void(const Status&)> on_lost_;
  bool lost_ = false;
  int64_t next_seq_ = 1;
};

}  // namespace pipecoord::coordinator::ha

#endif  // PIPECOORD_COORDINATOR_HA_ETCD_STATE_STORE_H_
