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
  std::lock_guard<std::mutex> lock(mu_);
  auto state = store_->Load(events_by_job);
  if (state.ok()) {
    for (const v1::Job& j : state->jobs) jobs_.insert(j.id());
  }
  return state;
}

void StateWriter::NoteStoredTelemetry(const std::string& job_id, int64_t seq, int actions) {
  if (store_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  NoteStoredTelemetryLocked(job_id, seq, actions);
}

void StateWriter::NoteStoredTelemetryLocked(const std::string& job_id, int64_t seq, int actions) {
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

void StateWriter::FlushLocked() {
  // Consecutive events in one write (one transaction in SQLite); each step record as it comes.
  std::vector<std::pair<std::string, std::string>> events;
  auto write_events = [&] {
    if (events.empty()) return;
    Log(store_->AppendEvents(events));
    events.clear();
  };
  for (Queued& q : queued_) {
    if (!q.step) {
      events.emplace_back(std::move(q.job_id), std::move(q.event_bytes));
      continue;
    }
    write_events();
    Log(store_->AppendStep(q.job_id, *q.step));
  }
  write_events();
  queued_.clear();
}

void StateWriter::Flush() {
  if (store_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  FlushLocked();
}

Status StateWriter::PutNewJob(const v1::Job& job, const IdCounters& ids) {
  if (store_ == nullptr) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  FlushLocked();
  Status st = store_->PutJob(job);
  if (st.ok()) {
    jobs_.insert(job.id());
    st = store_->PutCounters(ids.next_job, ids.next_worker, ids.next_session, ids.epoch);
  }
  if (!st.ok()) return Unavailable("job not stored: " + st.message());
  return Status::Ok();
}

void StateWriter::PutJob(const v1::Job& job, const IdCounters& ids) {
  if (store_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  FlushLocked();
  Status st = store_->PutJob(job);
  if (st.ok()) {
    jobs_.insert(job.id());
    st = store_->PutCounters(ids.next_job, ids.next_worker, ids.next_session, ids.epoch);
  }
  Log(st);
}

Status StateWriter::PutCounters(const IdCounters& ids) {
  if (store_ == nullptr) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  FlushLocked();
  return store_->PutCounters(ids.next_job, ids.next_worker, ids.next_session, ids.epoch);
}

Status StateWriter::PutWorker(const std::string& worker_id, const IdCounters& ids) {
  if (store_ == nullptr) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  FlushLocked();
  Status st = store_->PutWorker(worker_id);
  if (st.ok()) st = store_->PutCounters(ids.next_job, ids.next_worker, ids.next_session, ids.epoch);
  if (!st.ok()) return Unavailable("worker not stored: " + st.message());
  return Status::Ok();
}

void StateWriter::BeginRound(bool deferred) {
  if (round_depth_++ == 0) deferred_ = deferred;
}

void StateWriter::EndRound() {
  if (--round_depth_ > 0 || deferred_ || store_ == nullptr) return;
  Flush();
}

void StateWriter::AppendEvent(const std::string& job_id, const v1::HealthEvent& event) {
  if (store_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  queued_.push_back({job_id, event.SerializeAsString(), std::nullopt});
  if (round_depth_ == 0) FlushLocked();
}

void StateWriter::AppendStep(const std::string& job_id, const v1::StepRecord& step) {
  if (store_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  queued_.push_back({job_id, "", step});
  if (round_depth_ == 0) FlushLocked();
}

void StateWriter::PutCheckpointedSteps(const std::string& job_id, int n) {
  if (store_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  FlushLocked();
  Log(store_->PutCheckpointedSteps(job_id, n));
}

Status StateWriter::AppendTelemetry(const std::string& job_id, const v1::TelemetryBatch& batch) {
  const TelemetryRow row{&job_id, &batch};
  size_t stored = 0;
  return AppendTelemetryRows({row}, &stored);
}

Status StateWriter::AppendTelemetryRows(const std::vector<TelemetryRow>& rows, size_t* stored) {
  *stored = rows.size();
  if (store_ == nullptr || rows.empty()) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  FlushLocked();
  std::vector<TelemetryRow> live;  // the rows of jobs not deleted meanwhile
  live.reserve(rows.size());
  for (const TelemetryRow& r : rows) {
    if (jobs_.count(*r.job_id) > 0) live.push_back(r);
  }
  std::vector<int64_t> seqs;
  const Status st = live.empty() ? Status::Ok() : store_->AppendTelemetryRows(live, &seqs);
  for (size_t i = 0; i < seqs.size() && i < live.size(); ++i) {
    NoteStoredTelemetryLocked(*live[i].job_id, seqs[i], WindowWeight(*live[i].batch));
  }
  if (st.ok()) return Status::Ok();
  // Stored: the rows up to the first live one the store did not take.
  size_t taken = 0, covered = 0;
  for (const TelemetryRow& r : rows) {
    if (jobs_.count(*r.job_id) > 0) {
      if (taken == seqs.size()) break;
      ++taken;
    }
    ++covered;
  }
  *stored = covered;
  return Unavailable("telemetry not stored: " + st.message());
}

Status StateWriter::DeleteJob(const std::string& job_id) {
  if (store_ == nullptr) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  // Its queued events and steps go with it (stored after the delete they would be orphans).
  std::erase_if(queued_, [&](const Queued& q) { return q.job_id == job_id; });
  FlushLocked();
  PIPECOORD_RETURN_IF_ERROR(store_->DeleteJob(job_id));
  windows_.erase(job_id);
  jobs_.erase(job_id);
  return Status::Ok();
}

}  // namespace pipecoord::coordinator
