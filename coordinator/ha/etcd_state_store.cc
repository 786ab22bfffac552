#include "coordinator/ha/etcd_state_store.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>

namespace pipecoord::coordinator::ha {

EtcdStateStore::EtcdStateStore(EtcdClient* client, std::string prefix, const EtcdLeadership* guard,
                               std::function<void(const Status&)> on_lost)
    : client_(client), prefix_(std::move(prefix)), guard_(guard), on_lost_(std::move(on_lost)) {}

std::string EtcdStateStore::where() const { return "etcd " + client_->endpoints() + " under " + prefix_; }

std::string EtcdStateStore::SeqKey(const char* kind, const std::string& job_id, int64_t seq) const {
  char digits[24];
  std::snprintf(digits, sizeof(digits), "%020" PRId64, seq);
  return prefix_ + kind + "/" + job_id + "/" + digits;
}

Status EtcdStateStore::Write(std::vector<EtcdOp> ops) {
  Status st = client_->Txn(ops, guard_);
  if (st.code() == Code::kFailedPrecondition && guard_ != nullptr && !lost_) {
    lost_ = true;
    if (on_lost_) on_lost_(st);
  }
  return st;
}

Status EtcdStateStore::PutJob(const v1::Job& job) {
  v1::Job row = job;  // steps and events are keys of their own
  row.clear_steps();
  row.clear_events();
  return Write({EtcdOp::Put(prefix_ + "job/" + job.id(), row.SerializeAsString())});
}

Status EtcdStateStore::AppendEvent(const std::string& job_id, const std::string& event_bytes) {
  return Write({EtcdOp::Put(SeqKey("event", job_id, next_seq_++), event_bytes)});
}

Status EtcdStateStore::AppendStep(const std::string& job_id, const v1::StepRecord& step) {
  return Write({EtcdOp::Put(SeqKey("step", job_id, next_seq_++), step.SerializeAsString())});
}

Result<int64_t> EtcdStateStore::AppendTelemetry(const std::string& job_id, const v1::TelemetryBatch& batch) {
  const int64_t seq = next_seq_++;
  PIPECOORD_RETURN_IF_ERROR(Write({EtcdOp::Put(SeqKey("tele", job_id, seq), batch.SerializeAsString())}));
  return seq;
}

Status EtcdStateStore::DropTelemetryBefore(const std::string& job_id, int64_t seq) {
  return Write({EtcdOp::DeleteRange(prefix_ + "tele/" + job_id + "/", SeqKey("tele", job_id, seq))});
}

Status EtcdStateStore::PutCheckpointedSteps(const std::string& job_id, int n) {
  return Write({EtcdOp::Put(prefix_ + "ckpt/" + job_id, std::to_string(n))});
}

Status EtcdStateStore::PutWorker(const std::string& worker_id) {
  return Write({EtcdOp::Put(prefix_ + "worker/" + worker_id, "")});
}

Status EtcdStateStore::PutCounters(uint64_t next_job, uint64_t next_worker, uint64_t next_session, uint64_t epoch) {
  return Write({EtcdOp::Put(prefix_ + "counters", std::to_string(next_job) + " " + std::to_string(next_worker) + " " +
                                                      std::to_string(next_session) + " " + std::to_string(epoch))});
}

Status EtcdStateStore::DeleteJob(const std::string& job_id) {
  return Write({EtcdOp::Delete(prefix_ + "job/" + job_id), EtcdOp::DeletePrefix(prefix_ + "event/" + job_id + "/"),
                EtcdOp::DeletePrefix(prefix_ + "step/" + job_id + "/"),
                EtcdOp::DeletePrefix(prefix_ + "tele/" + job_id + "/"), EtcdOp::Delete(prefix_ + "ckpt/" + job_id)});
}

Result<StoredState> EtcdStateStore::Load(std::vector<std::vector<std::string>>* events_by_job) {
  auto kvs = client_->GetPrefix(prefix_);
  if (!kvs.ok()) return kvs.status();
  const std::string bad = where() + ": ";
  StoredState out;
  // Jobs first (in submission order), then what belongs to them.
  std::vector<const EtcdKv*> job_rows;
  for (const EtcdKv& kv : *kvs) {
    if (kv.key.compare(prefix_.size(), 4, "job/") == 0) job_rows.push_back(&kv);
  }
  std::sort(job_rows.begin(), job_rows.end(),
            [](const EtcdKv* a, const EtcdKv* b) { return a->create_revision < b->create_revision; });
  std::map<std::string, size_t> index;
  for (const EtcdKv* kv : job_rows) {
    v1::Job job;
    if (!job.ParseFromString(kv->value)) return Unavailable(bad + "job row " + kv->key + " does not parse");
    index[job.id()] = out.jobs.size();
    out.jobs.push_back(std::move(job));
  }
  out.telemetry.resize(out.jobs.size());
  events_by_job->assign(out.jobs.size(), {});
  int64_t max_seq = 0;
  // Keys come in key order, so each job's seq keys come oldest first.
  for (const EtcdKv& kv : *kvs) {
    const std::string rest = kv.key.substr(prefix_.size());
    const size_t slash = rest.find('/');
    const std::string kind = rest.substr(0, slash);
    if (kind == "event" || kind == "step" || kind == "tele") {
      const size_t last = rest.rfind('/');
      if (last == slash) return Unavailable(bad + "key " + kv.key + " has no seq");
      const std::string job_id = rest.substr(slash + 1, last - slash - 1);
      const int64_t seq = std::strtoll(rest.c_str() + last + 1, nullptr, 10);
      max_seq = std::max(max_seq, seq);
      auto it = index.find(job_id);
      if (it == index.end()) continue;
      if (kind == "event") {
        (*events_by_job)[it->second].push_back(kv.value);
      } else if (kind == "step") {
        if (!out.jobs[it->second].add_steps()->ParseFromString(kv.value)) {
          return Unavailable(bad + "step " + kv.key + " does not parse");
        }
      } else {
        StoredBatch b;
        b.seq = seq;
        if (!b.batch.ParseFromString(kv.value)) return Unavailable(bad + "telemetry " + kv.key + " does not parse");
        out.telemetry[it->second].push_back(std::move(b));
      }
    } else if (kind == "ckpt") {
      auto it = index.find(rest.substr(slash + 1));
      if (it != index.end()) out.jobs[it->second].set_checkpointed_steps(std::atoi(kv.value.c_str()));
    } else if (kind == "worker") {
      out.worker_ids.push_back(rest.substr(slash + 1));
    } else if (rest == "counters") {
      unsigned long long j = 1, w = 1, s = 1, e = 0;
      if (std::sscanf(kv.value.c_str(), "%llu %llu %llu %llu", &j, &w, &s, &e) != 4) {
        return Unavailable(bad + "counters \"" + kv.value + "\" do not parse");
      }
      out.next_job = j;
      out.next_worker = w;
      out.next_session = s;
      out.epoch = e;
    }
  }
  next_seq_ = max_seq + 1;
  return out;
}

}  // namespace pipecoord::coordinator::ha
