#include "coordinator/state_writer.h"

#include <algorithm>

#include <cstdio>

namespace pipecoord::coordinator {

StateWriter::StateWriter(StateStore* store, size_t trace_actions_per_job)
    : store_(store), trace_actions_per_job_(trace_actions_per_job) {}

std::string StateWriter::where() const { return store_ == nullptr ? "" : store_->where(); }

void StateWriter::Log(const Status& st) const {
  if (!st.ok()) std::fprintf(stderr, "coordinator: %s\n", st.message().c_str());
}

Result<StoredState> StateWriter::Load(std::vector<std::vector<std::string>>* events_by_job) {
  if (store_ == nullptr) return StoredState{};
  return store_->Load(events_by_job);
}

void StateWriter::NoteStoredTelemetry(const std::string& job_id, int64_t seq, int actions) {
  if (store_ == nullptr) return;
  Window& w = windows_[job_id];
  w.rows.emplace_back(seq, actions);
  w.actions += actions;
  while (w.rows.size() > 1 && w.actions - w.rows.front().second >= static_cast<int64_t>(trace_actions_per_job_)) {
    w.actions -= w.rows.front().second;
    w.rows.pop_front();
    ++w.rows_to_drop;
  }
  if (w.rows_to_drop < kRowsPerDrop) return;
  // A failed drop leaves rows behind, harmless: the next one (or a restore) takes them.
  Log(store_->DropTelemetryBefore(job_id, w.rows.front().first));
  w.rows_to_drop = 0;
}

Status StateWriter::PutNewJob(const v1::Job& job, const IdCounters& ids) {
  if (store_ == nullptr) return Status::Ok();
  Status st = store_->PutJob(job);
  if (st.ok()) st = store_->PutCounters(ids.next_job, ids.next_worker, ids.next_session, ids.epoch);
  if (!st.ok()) return Unavailable("job not stored: " + st.message());
  return Status::Ok();
}

void StateWriter::PutJob(const v1::Job& job, const IdCounters& ids) {
  if (store_ == nullptr) return;
  Status st = store_->PutJob(job);
  if (st.ok()) st = store_->PutCounters(ids.next_job, ids.next_worker, ids.next_session, ids.epoch);
  Log(st);
}

Status StateWriter::PutCounters(const IdCounters& ids) {
  if (store_ == nullptr) return Status::Ok();
  return store_->PutCounters(ids.next_job, ids.next_worker, ids.next_session, ids.epoch);
}

Status StateWriter::PutWorker(const std::string& worker_id, const IdCounters& ids) {
  if (store_ == nullptr) return Status::Ok();
  Status st = store_->PutWorker(worker_id);
  if (st.ok()) st = store_->PutCounters(ids.next_job, ids.next_worker, ids.next_session, ids.epoch);
  if (!st.ok()) return Unavailable("worker not stored: " + st.message());
  return Status::Ok();
}

void StateWriter::AppendEvent(const std::string& job_id, const v1::HealthEvent& event) {
  if (store_ == nullptr) return;
  if (round_depth_ > 0) {
    pending_events_.emplace_back(job_id, event.SerializeAsString());
  } else {
    Log(store_->AppendEvent(job_id, event.SerializeAsString()));
  }
}

void StateWriter::EndRound() {
  if (--round_depth_ > 0 || pending_events_.empty()) return;
  std::vector<std::pair<std::string, std::string>> events;
  events.swap(pending_events_);
  Log(store_->AppendEvents(events));
}

void StateWriter::AppendStep(const std::string& job_id, const v1::StepRecord& step) {
  if (store_ != nullptr) Log(store_->AppendStep(job_id, step));
}

void StateWriter::PutCheckpointedSteps(const std::string& job_id, int n) {
  if (store_ != nullptr) Log(store_->PutCheckpointedSteps(job_id, n));
}

Status StateWriter::AppendTelemetry(const std::string& job_id, const v1::TelemetryBatch& batch) {
  if (store_ == nullptr) return Status::Ok();
  auto seq = store_->AppendTelemetry(job_id, batch);
  if (!seq.ok()) return Unavailable("telemetry not stored: " + seq.status().message());
  NoteStoredTelemetry(job_id, *seq, WindowWeight(batch));
  return Status::Ok();
}

Status StateWriter::AppendTelemetryRows(const std::vector<TelemetryRow>& rows, size_t* stored) {
  *stored = rows.size();
  if (store_ == nullptr || rows.empty()) return Status::Ok();
  std::vector<int64_t> seqs;
  const Status st = store_->AppendTelemetryRows(rows, &seqs);
  *stored = std::min(seqs.size(), rows.size());
  for (size_t i = 0; i < seqs.size() && i < rows.size(); ++i) NoteStoredTelemetry(*rows[i].job_id, seqs[i], WindowWeight(*rows[i].batch));
  if (!st.ok()) return Unavailable("telemetry not stored: " + st.message());
  return Status::Ok();
}

Status StateWriter::DeleteJob(const std::string& job_id) {
  if (store_ == nullptr) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(store_->DeleteJob(job_id));
  windows_.erase(job_id);
  // Its events queued in this round go with it (stored after the delete they would be orphans).
  std::erase_if(pending_events_, [&](const auto& e) { return e.first == job_id; });
  return Status::Ok();
}

}  // namespace pipecoord::coordinator
