#include "coordinator/coordinator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jobplan/auto_plan.h"
#include "jobplan/assignment.h"
#include "jobplan/layout.h"
#include "jobplan/recovery.h"
#include "jobplan/placement.h"
#include "jobplan/plan_job.h"
#include "coordinator/job_record.h"
#include "coordinator/run_trace.h"
#include "data/hf_llama_weights.h"
#include "data/job_data.h"
#include "jobplan/data_spec.h"
#include "jobplan/hf_config.h"
#include "jobplan/spec_validation.h"
#include "memory/units.h"
#include "proto/worker_kinds.h"

namespace pipecoord::coordinator {

namespace {

int64_t WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

const char* StateName(v1::JobState s) { return v1::JobState_Name(s).c_str(); }

}  // namespace

Coordinator::Coordinator(CoordinatorOptions options)
    : options_(std::move(options)),
      state_(options_.store, options_.trace_actions_per_job),
      workers_(options_.lease),
      lease_ms_(options_.lease.count()) {
  if (!options_.now_ns) options_.now_ns = WallNs;
  workers_.set_on_commands([this](const std::string& id) { wakeups_.Notify("worker/" + id); });
}

uint64_t Coordinator::SubscribeCommands(const std::string& worker_id, std::function<void()> ready) {
  return wakeups_.Subscribe("worker/" + worker_id, std::move(ready));
}

uint64_t Coordinator::SubscribeJobUpdates(const std::string& job_id, std::function<void()> ready) {
  return wakeups_.Subscribe("job/" + job_id, std::move(ready));
}

void Coordinator::Unsubscribe(uint64_t token) { wakeups_.Unsubscribe(token); }

Coordinator::~Coordinator() { Shutdown(); }

Status Coordinator::Restore() {
  if (!state_.enabled()) return Status::Ok();
  std::vector<std::vector<std::string>> events;
  auto state = state_.Load(&events);
  if (!state.ok()) return state.status();
  std::lock_guard<std::mutex> lock(mu_);
  if (!jobs_.empty() || !workers_.empty()) return FailedPrecondition("Restore: the coordinator is already in use");
  ids_.next_job = std::max<uint64_t>(ids_.next_job, state->next_job);
  ids_.next_worker = std::max<uint64_t>(ids_.next_worker, state->next_worker);
  ids_.next_session = std::max<uint64_t>(ids_.next_session, state->next_session);
  // A new epoch, stored before anything is served: a worker that saw this coordinator's answers
  // obeys no coordinator still running on the old one (fencing).
  ids_.epoch = state->epoch + 1;
  epoch_ = ids_.epoch;
  PIPECOORD_RETURN_IF_ERROR(state_.PutCounters(ids_));
  for (size_t i = 0; i < state->jobs.size(); ++i) {
    auto record = std::make_unique<JobRecord>();
    JobRecord& j = *record;
    j.job = std::move(state->jobs[i]);
    if (options_.metrics != nullptr) {
      // /metrics: the job's series as the previous process left them (steps as measured, before
      // the restarts' replaced ones are dropped below).
      std::vector<const v1::TelemetryBatch*> batches;
      for (const StoredBatch& row : state->telemetry[i]) batches.push_back(&row.batch);
      health::ReplayJobMetrics(j.job, events[i], batches, options_.metrics);
    }
    // Steps in the order they were measured; a restart went back to its start step, so a record
    // replaces the later-numbered ones before it, as QueueAgainLocked did in memory.
    auto* steps = j.job.mutable_steps();
    int kept = 0;
    for (int k = 0; k < steps->size(); ++k) {
      while (kept > 0 && steps->Get(kept - 1).step() >= steps->Get(k).step()) --kept;
      steps->SwapElements(kept++, k);
    }
    steps->DeleteSubrange(kept, steps->size() - kept);
    j.job.set_steps_done(j.job.steps_size());  // each measured step was stored as it was counted
    // Waiting to resume at start_step: what a stopped attempt measured from there on was dropped
    // in memory when the job was queued again (QueueAgainLocked), not from the file.
    if (j.job.state() == v1::PENDING) j.DropStepsFrom(j.job.start_step());
    // A job that restarted and was waiting for workers resumes from its start step, not step 0.
    j.ResetAttempt(j.job.start_step());
    // The checkpoints table holds the restart point; telemetry rows refine it per rank.
    j.last_checkpoint.assign(j.world(), j.job.checkpointed_steps() - 1);
    j.monitor = std::make_shared<health::JobMonitor>(j.job, options_.metrics);
    // The WatchJob log: each measured step, then each event (their interleaving is not kept).
    for (const v1::StepRecord& rec : j.job.steps()) j.updates.push_back(j.StepUpdate(rec));
    for (const std::string& bytes : events[i]) {
      v1::HealthEvent e;
      if (!e.ParseFromString(bytes)) return Unavailable(state_.where() + ": an event does not parse");
      v1::JobUpdate u;
      u.set_state(j.job.state());
      u.set_event(e.message());
      *u.mutable_health_event() = e;
      j.updates.push_back(std::move(u));
      *j.job.add_events() = std::move(e);
    }
    // Measured actions for the trace, newest kept.
    for (const StoredBatch& row : state->telemetry[i]) {
      const v1::TelemetryBatch& b = row.batch;
      state_.NoteStoredTelemetry(j.job.id(), row.seq, StateWriter::WindowWeight(b));
      const int g = jobplan::LayoutOf(j.job.spec()).Global({b.rank(), b.dp_rank(), b.tp_rank()});
      if (g < 0 || g >= j.world()) continue;
      for (const v1::StepSummary& s : b.steps()) {
        for (int c : s.checkpointed_steps()) NoteCheckpointLocked(j, g, c);
      }
      if (b.totals_size() > 0) continue;  // the trace keeps whole steps
      j.actions.insert(j.actions.end(), b.actions().begin(), b.actions().end());
      j.action_rank.insert(j.action_rank.end(), b.actions_size(), g);
    }
    j.TrimActions(options_.trace_actions_per_job);
    jobs_.push_back(std::move(record));
    if (j.job.state() == v1::RUNNING) {
      if (j.job.session() == 0 || j.job.worker_ids_size() != j.world()) {
        // A state file from before sessions were stored: its workers cannot be matched.
        FinishJobLocked(j, v1::FAILED, "the coordinator restarted while the job was running", -1);
        continue;
      }
      // Its workers ride out the coordinator's absence: wait for them to register again.
      j.session = j.job.session();
      j.commits = jobplan::RunsStepCommit(j.job.spec());
      ResumeAttemptLocked(j, state->telemetry[i]);
      j.adopting = true;
      j.adopted.assign(j.world(), false);
      j.adopt_deadline = Clock::now() + options_.adopt_grace;
      RecordEventLocked(j, "the coordinator restarted (epoch " + std::to_string(ids_.epoch) + "): waiting up to " +
                               std::to_string(options_.adopt_grace.count()) + " ms for the job's " +
                               std::to_string(j.world()) + " worker(s) to come back; steps recorded: " +
                               std::to_string(j.job.steps_done()));
    }
  }
  // A lowered --max-jobs drops the oldest finished jobs now; live ones all stay (then new
  // submissions wait for room).
  (void)MakeRoomLocked(options_.max_jobs);
  return Status::Ok();
}

int64_t Coordinator::NowNs() const { return options_.now_ns(); }

void Coordinator::ResumeAttemptLocked(JobRecord& j, const std::vector<StoredBatch>& rows) {
  // Each rank's place in its telemetry, and the steps some ranks summarized but not all (or all,
  // when the previous process stopped between storing the batch and recording the step): taken
  // again from the batches of this attempt, newest rows only (older ones may have left the window).
  const RankLayout layout = jobplan::LayoutOf(j.job.spec());
  const int recorded = j.job.steps_size() > 0 ? j.job.steps(j.job.steps_size() - 1).step() : j.job.start_step() - 1;
  std::vector<int> last(j.world(), j.job.start_step() - 1), open_actions(j.world(), 0);
  std::vector<const v1::TelemetryBatch*> unmeasured;
  std::vector<int> unmeasured_rank;
  for (const StoredBatch& row : rows) {
    const v1::TelemetryBatch& b = row.batch;
    if (b.session() != j.session) continue;
    const int g = layout.Global({b.rank(), b.dp_rank(), b.tp_rank()});
    if (g < 0 || g >= j.world()) continue;
    if (b.steps_size() > 0) {
      last[g] = b.steps(b.steps_size() - 1).step();
      open_actions[g] = 0;
    } else {
      open_actions[g] += TimedActions(b);
    }
    if (BatchStep(b) > recorded) {
      unmeasured.push_back(&b);
      unmeasured_rank.push_back(g);
    }
  }
  for (int g = 0; g < j.world(); ++g) j.order.Resume(g, last[g], open_actions[g]);
  for (size_t k = 0; k < unmeasured.size(); ++k) {
    std::vector<jobplan::StepActions> actions;
    const std::vector<v1::StepRecord> measured = j.measuring.Add(unmeasured_rank[k], *unmeasured[k], &actions);
    for (size_t m = 0; m < measured.size(); ++m) StepMeasuredLocked(j, measured[m], std::move(actions[m]));
  }
}

JobRecord* Coordinator::FindJobLocked(const std::string& id) const {
  for (const auto& j : jobs_) {
    if (j->job.id() == id) return j.get();
  }
  return nullptr;
}

void Coordinator::PublishLocked(JobRecord& j, v1::JobUpdate update) {
  if (j.updates.empty() || j.updates.size() < options_.max_updates_per_job ||
      update.state() != j.updates.back().state()) {
    j.updates.push_back(std::move(update));
  }
  changed_.notify_all();
  wakeups_.Notify("job/" + j.job.id());
}

void Coordinator::RecordEventLocked(JobRecord& j, const std::string& event) {
  v1::HealthEvent e;
  e.set_kind(v1::LIFECYCLE);
  e.set_rank(-1);
  e.set_dp_rank(-1);
  e.set_step(-1);
  e.set_message(event);
  RecordHealthEventLocked(j, std::move(e));
}

void Coordinator::RecordHealthEventLocked(JobRecord& j, v1::HealthEvent event) {
  event.set_unix_ms(NowNs() / 1'000'000);
  if (options_.metrics != nullptr) options_.metrics->Event(j.job.id(), v1::EventKind_Name(event.kind()));
  v1::JobUpdate u;
  u.set_state(j.job.state());
  u.set_event(event.message());
  *u.mutable_health_event() = event;
  state_.AppendEvent(j.job.id(), event);
  *j.job.add_events() = std::move(event);
  PublishLocked(j, std::move(u));
}

Status Coordinator::MakeRoomLocked(size_t keep) {
  while (jobs_.size() > keep) {
    auto it = std::find_if(jobs_.begin(), jobs_.end(), [](const auto& j) { return j->terminal(); });
    if (it == jobs_.end()) {
      return ResourceExhausted("jobs: " + std::to_string(jobs_.size()) + " live jobs stored, the limit (--max-jobs " +
                               std::to_string(options_.max_jobs) + ")");
    }
    PIPECOORD_RETURN_IF_ERROR(state_.DeleteJob((*it)->job.id()));
    if (options_.metrics != nullptr) options_.metrics->ForgetJob((*it)->job.id());
    jobs_.erase(it);
  }
  return Status::Ok();
}

Result<v1::SubmitJobResponse> Coordinator::SubmitJob(const v1::JobSpec& raw, bool dry_run) {
  PIPECOORD_RETURN_IF_ERROR(jobplan::ValidateJobSpec(raw));
  // Planning is pure and may take a moment: outside the lock ("auto" reads the free workers
  // under it first).
  jobplan::AutoPlan planned;
  const bool is_auto = jobplan::IsAuto(raw);
  v1::BestScheduleReport best;  // schedule "best": its ranking, kept beside the job
  if (is_auto) {
    jobplan::FreeWorkers free;
    free.device_kind = raw.device().empty() ? "cpu" : raw.device();
    {
      std::lock_guard<std::mutex> lock(mu_);
      const WorkerRegistry::Capacity cap = workers_.FreeCapacity(free.device_kind);
      free.count = cap.count;
      free.memory_bytes = cap.smallest_memory_bytes;
      free.largest_host = cap.largest_host;
    }
    jobplan::AutoPlanOptions auto_options;
    auto_options.shapes = &schedule_shapes_;  // what earlier searches built (a dry run's, say)
    auto a = jobplan::PlanAuto(raw, free, auto_options);
    if (!a.ok()) return a.status();
    planned = std::move(a).value();
  } else {
    planned.spec = jobplan::WithDefaults(raw, &best);
    auto plan = jobplan::PlanJob(planned.spec);
    if (!plan.ok()) return plan.status();
    planned.plan = std::move(plan).value();
  }
  const v1::JobSpec& spec = planned.spec;
  if (spec.has_data()) {
    // Bad data is refused here, before any worker starts: the coordinator opens the datasets as
    // the workers will (it runs beside them; on Kubernetes it mounts what the pods mount).
    auto opened = data::JobData::Open(jobplan::JobDataSpecOf(spec));
    if (!opened.ok()) return opened.status();
  }
  if (!spec.init().empty()) {
    // Initial weights too: pipectl checks them where it can read them, a client of the API may
    // not have; every missing, extra or misshapen tensor is refused here by name.
    const v1::ModelSpec& m = spec.model();
    auto weights = data::HfLlamaWeights::Open(spec.init(), jobplan::LlamaShapeOf(m));
    if (!weights.ok()) return InvalidArgument("spec.init: " + weights.status().message());
  }
  v1::SubmitJobResponse response;
  response.set_predicted_bubble_rate(planned.plan.predicted_bubble_rate());
  response.set_predicted_makespan(planned.plan.predicted_makespan());
  *response.mutable_spec() = spec;
  if (is_auto) *response.mutable_auto_plan() = planned.report;
  if (best.ranked_size() > 0) *response.mutable_best() = best;
  if (dry_run) return response;

  std::lock_guard<std::mutex> lock(mu_);
  PIPECOORD_RETURN_IF_ERROR(MakeRoomLocked(std::max<size_t>(options_.max_jobs, 1) - 1));
  auto record = std::make_unique<JobRecord>();
  char id[32];
  std::snprintf(id, sizeof id, "job-%06llu", static_cast<unsigned long long>(ids_.next_job++));
  record->job.set_id(id);
  *record->job.mutable_spec() = spec;
  *record->job.mutable_plan() = std::move(planned.plan);
  if (is_auto) *record->job.mutable_auto_plan() = planned.report;
  if (best.ranked_size() > 0) *record->job.mutable_best() = std::move(best);
  record->job.set_state(v1::PENDING);
  record->job.set_failed_rank(-1);
  record->job.set_created_unix_ms(NowNs() / 1'000'000);
  record->ResetAttempt(0);
  record->last_checkpoint.assign(record->world(), -1);
  record->monitor = std::make_shared<health::JobMonitor>(record->job, options_.metrics);
  response.set_job_id(id);
  // Stored before it is acknowledged: a client that got an id can always find the job.
  if (Status st = state_.PutNewJob(record->job, ids_); !st.ok()) {
    --ids_.next_job;
    return st;
  }
  JobRecord& j = *record;
  jobs_.push_back(std::move(record));
  RecordEventLocked(j, "submitted: " + spec.schedule() + (is_auto ? " (chosen by \"auto\")" : "") + ", pp " + std::to_string(spec.pp()) +
                           ", dp " + std::to_string(spec.dp()) +
                           (spec.tp() > 1 ? ", tp " + std::to_string(spec.tp()) + (spec.sequence_parallel() ? "+sp" : "") : "") +
                           (spec.zero() > 0 ? ", zero " + std::to_string(spec.zero()) : "") +
                           (!spec.recompute().empty() && spec.recompute() != "none" ? ", recompute " + spec.recompute() : "") +
                           ", waiting for " + std::to_string(j.world()) + " worker(s)");
  TryDispatchLocked();
  return response;
}

Result<v1::Job> Coordinator::GetJob(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  JobRecord* j = FindJobLocked(id);
  if (j == nullptr) return NotFound("job \"" + id + "\" not found");
  return j->job;
}

std::vector<v1::Job> Coordinator::ListJobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::Job> out;
  for (const auto& j : jobs_) {
    // Copied without its plan (tens of MB at thousands of ranks, copied under the lock on every
    // call before) and its steps: both moved aside for the copy and back, nothing else changes.
    v1::Job& live = j->job;
    v1::Plan plan;
    google::protobuf::RepeatedPtrField<v1::StepRecord> steps;
    plan.Swap(live.mutable_plan());
    steps.Swap(live.mutable_steps());
    v1::Job copy = live;
    live.mutable_plan()->Swap(&plan);
    live.mutable_steps()->Swap(&steps);
    copy.clear_plan();
    if (live.steps_size() > 0) *copy.add_steps() = live.steps(live.steps_size() - 1);
    out.push_back(std::move(copy));
  }
  return out;
}

Result<v1::JobState> Coordinator::CancelJob(const std::string& id, bool checkpoint) {
  std::lock_guard<std::mutex> lock(mu_);
  JobRecord* j = FindJobLocked(id);
  if (j == nullptr) return NotFound("job \"" + id + "\" not found");
  if (checkpoint) {
    const v1::JobSpec& spec = j->job.spec();
    if (j->job.state() != v1::RUNNING || j->adopting) {
      return FailedPrecondition("checkpoint: " + id + " is " + StateName(j->job.state()) +
                                ", not running: nothing to checkpoint (cancel it without --checkpoint)");
    }
    if (spec.checkpoint_every() <= 0) {
      return FailedPrecondition("checkpoint: " + id + " saves no checkpoints (spec.checkpointEvery 0)");
    }
    if (j->drain_step < 0) {
      StopEveryRankAfterAStepLocked(*j, "", AfterStop::kCancel);
    } else {
      j->drain_then = AfterStop::kCancel;  // a drain already under way ends the job instead of resuming it
    }
    return j->job.state();
  }
  if (!j->terminal()) FinishJobLocked(*j, v1::CANCELLED, "cancelled by the user", -1);
  return j->job.state();
}

void Coordinator::ReleaseWorkersLocked(JobRecord& j, bool cancel) {
  for (const std::string& id : j.job.worker_ids()) workers_.Close(id, j.job.id(), j.session, cancel);
}

Status Coordinator::ReleaseJob(const v1::ReleaseJobRequest& r) {
  std::lock_guard<std::mutex> lock(mu_);
  RegisteredWorker* w = workers_.Find(r.worker_id());
  if (w == nullptr) return NotFound("worker \"" + r.worker_id() + "\" is not registered (lease lost?)");
  if (!w->Holds(r.job_id(), r.session())) return Status::Ok();  // an older hold, long gone
  const int g = w->global_rank;
  const std::string worker = w->info.worker_id();
  const bool was_closing = w->info.closing();
  workers_.Free(*w);
  JobRecord* j = FindJobLocked(r.job_id());
  if (!was_closing && j != nullptr && !j->terminal() && j->session == r.session() && g >= 0 && g < j->world() &&
      !j->outcome.reported(g) && !(j->drain_step >= 0 && j->drained[g])) {
    if (j->MeasuredEveryStep(g)) {
      // Its success went to a coordinator that died before this one (results are not stored;
      // the telemetry it sends first is): its part is done.
      if (j->outcome.Succeeded(g)) FinishJobLocked(*j, v1::SUCCEEDED, "", -1);
    } else {
      // It closed its links without a word on how its part ended (the report was lost).
      FinishJobLocked(*j, v1::FAILED,
                      "rank " + std::to_string(g % j->job.spec().pp()) + " (" + worker + ") left the job without reporting a result",
                      g % j->job.spec().pp());
    }
  }
  TryDispatchLocked();
  return Status::Ok();
}

void Coordinator::FinishJobLocked(JobRecord& j, v1::JobState state, const std::string& cause, int rank, bool restart) {
  EndRecoveryLocked(j);
  j.adopting = false;
  j.job.clear_recovering();
  if (state == v1::FAILED && restart && j.job.restarts() < j.job.spec().max_restarts()) return RestartJobLocked(j, cause);
  j.job.set_state(state);
  if (state == v1::FAILED) {
    j.job.set_failure_cause(cause);
    j.job.set_failed_rank(rank);
  }
  ReleaseWorkersLocked(j, state != v1::SUCCEEDED);
  state_.PutJob(j.job, ids_);
  RecordEventLocked(j, std::string(StateName(state)) + (cause.empty() ? "" : ": " + cause));
  TryDispatchLocked();
}

// The restart policy: stop the attempt, forget what it measured past the last step every rank
// checkpointed, and queue the job again to resume there on whichever workers are free.
void Coordinator::RestartJobLocked(JobRecord& j, const std::string& cause) {
  const int from = j.job.checkpointed_steps();
  if (FinishCheckpointedLocked(j, from, cause)) return;
  j.job.set_restarts(j.job.restarts() + 1);
  QueueAgainLocked(j, from,
                   "restarting (" + std::to_string(j.job.restarts()) + " of " + std::to_string(j.job.spec().max_restarts()) +
                       ") from step " + std::to_string(from) +
                       (from > 0 ? " (its checkpoint)" : " (no checkpoint on every rank yet)") + ": " + cause);
}

bool Coordinator::FinishCheckpointedLocked(JobRecord& j, int from, const std::string& why) {
  if (from < j.job.spec().steps()) return false;
  ReleaseWorkersLocked(j, /*cancel=*/true);
  RecordEventLocked(j, "every step is checkpointed on every rank, nothing is left to run: not started again after " + why);
  FinishJobLocked(j, v1::SUCCEEDED, "", -1, /*restart=*/false);
  return true;
}

void Coordinator::QueueAgainLocked(JobRecord& j, int from, const std::string& event) {
  if (FinishCheckpointedLocked(j, from, event)) return;
  ReleaseWorkersLocked(j, true);
  j.job.set_start_step(from);
  j.previous_workers.assign(j.job.worker_ids().begin(), j.job.worker_ids().end());
  j.job.clear_worker_ids();
  j.DropStepsFrom(from);
  j.ResetAttempt(from);
  j.adopting = false;
  j.monitor = std::make_shared<health::JobMonitor>(j.job, options_.metrics);
  j.job.set_state(v1::PENDING);
  state_.PutJob(j.job, ids_);
  RecordEventLocked(j, event);
  TryDispatchLocked();
}

void Coordinator::LoseWorkerLocked(JobRecord& j, const std::string& why, int rank, const std::string& worker) {
  // A few requeues at most: a job whose workers keep vanishing before its first step fails.
  constexpr int kMaxRequeues = 3;
  if (j.order.MeasuredNothing() && j.requeues < kMaxRequeues && !j.recovery.active) {
    ++j.requeues;
    // Nothing measured, so nothing lost by starting again elsewhere; not the job's failure (no
    // restart is counted).
    QueueAgainLocked(j, j.job.start_step(), "back in the queue (" + why + ", before its first step)");
  } else if (worker.empty() || !RecoverInPlaceLocked(j, worker, why)) {
    FinishJobLocked(j, v1::FAILED, why, rank);
  }
}

bool Coordinator::RecoverInPlaceLocked(JobRecord& j, const std::string& worker, const std::string& why) {
  const v1::JobSpec& spec = j.job.spec();
  const RankLayout layout = jobplan::LayoutOf(spec);
  if (j.job.state() != v1::RUNNING || j.adopting || j.drain_step >= 0) return false;
  int lost = -1;
  for (int g = 0; g < j.job.worker_ids_size(); ++g) {
    if (j.job.worker_ids(g) == worker) lost = g;
  }
  if (lost < 0) return false;
  auto refuse = [&](const std::string& reason) {
    RecordEventLocked(j, "not recovering " + layout.Name(lost) + " in place: " + reason + "; the restart policy applies");
    return false;
  };
  if (j.recovery.active) {
    EndRecoveryLocked(j);
    return refuse("another rank (" + layout.Name(j.recovery.lost) + ") was being recovered");
  }
  if (const std::string refusal = jobplan::InPlaceRecoveryRefusal(spec); !refusal.empty()) return refuse(refusal);
  if (j.generation + 1 >= jobplan::kMaxGenerations) return refuse("too many recoveries in one attempt");
  // A spare: a free worker of the job's kind with room for the largest rank budget.
  uint64_t need = 0;
  for (uint64_t b : j.job.plan().memory_budget_bytes()) need = std::max(need, b);
  RegisteredWorker* spare = nullptr;
  for (RegisteredWorker* w : workers_.Available(spec.device(), spec.worker().kind())) {
    const uint64_t offered = w->info.device_memory_bytes();
    if (!w->draining && (offered == 0 || offered >= need)) {
      spare = w;
      break;
    }
  }
  // No spare: one replica fewer at the same global batch (dp x m samples per micro-batch size),
  // when the micro-batches divide over the replicas left and the new plan fits their workers.
  v1::JobSpec shrunk;
  v1::Plan shrunk_plan;
  if (spare == nullptr) {
    const int dp = layout.dp(), m = spec.microbatches();
    if ((dp * m) % (dp - 1) != 0) {
      return refuse("no spare worker is free, and the " + std::to_string(dp * m) + " micro-batches of a step do not divide over " +
                    std::to_string(dp - 1) + " replica(s)");
    }
    shrunk = spec;
    shrunk.set_dp(dp - 1);
    shrunk.set_microbatches(dp * m / (dp - 1));
    if (Status st = jobplan::ValidateJobSpec(shrunk); !st.ok()) {
      return refuse("no spare worker is free, and one replica fewer is not a valid job: " + st.message());
    }
    auto plan = jobplan::PlanJob(shrunk);
    if (!plan.ok()) return refuse("no spare worker is free, and one replica fewer cannot be planned: " + plan.status().message());
    shrunk_plan = std::move(plan).value();
    uint64_t shrunk_need = 0;
    for (uint64_t b : shrunk_plan.memory_budget_bytes()) shrunk_need = std::max(shrunk_need, b);
    for (int g = 0; g < j.world(); ++g) {
      if (layout.DataRank(g) == layout.DataRank(lost)) continue;
      const RegisteredWorker* w = workers_.Find(j.job.worker_ids(g));
      const uint64_t offered = w != nullptr ? w->info.device_memory_bytes() : 0;
      if (offered > 0 && offered < shrunk_need) {
        return refuse("no spare worker is free, and one replica fewer needs " + memory::FormatBytes(static_cast<int64_t>(shrunk_need)) +
                      " per rank, more than " + j.job.worker_ids(g) + " offers");
      }
    }
  }
  // A lost worker still registered (blamed by its peers, not dead) is told to stop its part.
  LetGoLocked(j, worker);
  if (spare != nullptr) {
    workers_.Assign(*spare, j.job.id(), lost, layout, j.session);
    j.job.set_worker_ids(lost, spare->info.worker_id());
    j.monitor->SetDeviceMemory(lost, spare->info.device_memory_bytes());
  }
  j.outcome = AttemptOutcome(j.world());  // the broken links were the lost rank's
  j.recovery = JobRecord::Recovery();
  j.recovery.active = true;
  j.recovery.shrink = spare == nullptr;
  j.recovery.shrunk_spec = std::move(shrunk);
  j.recovery.shrunk_plan = std::move(shrunk_plan);
  j.recovery.lost = lost;
  j.recovery.lost_worker = worker;
  j.recovery.lost_name = layout.Name(lost);
  if (spare != nullptr) j.recovery.spare = spare->info.worker_id();
  j.recovery.why = why;
  j.recovery.began = Clock::now();
  j.recovery.deadline = j.recovery.began + std::max<std::chrono::milliseconds>(options_.recovery_grace, 2 * Lease());
  j.awaiting.erase(lost);
  j.job.set_recovering(layout.Name(lost) + " lost (" + worker + "): " +
                       (j.recovery.shrink ? "going on with one replica fewer" : "being taken over by " + j.recovery.spare));
  // Every other rank stops where it is, keeping its state (those that reported stopped already).
  v1::WorkerCommand halt;
  halt.mutable_halt()->set_job_id(j.job.id());
  halt.mutable_halt()->set_session(j.session);
  TellEveryRankLocked(j, halt, [&](int g) { return g == lost || j.awaiting.count(g) > 0; });
  state_.PutJob(j.job, ids_);
  const int source = layout.AtDataRank(lost, (layout.DataRank(lost) + 1) % layout.dp());
  if (j.recovery.shrink) {
    RecordEventLocked(j, "lost " + layout.Name(lost) + " (" + why + "): no spare worker is free; going on with one replica fewer: dp " +
                             std::to_string(layout.dp()) + " -> " + std::to_string(j.recovery.shrunk_spec.dp()) + ", " +
                             std::to_string(j.recovery.shrunk_spec.microbatches()) +
                             " micro-batches per replica (the same global batch; no checkpoint read, no restart counted)");
  } else {
    RecordEventLocked(j, "lost " + layout.Name(lost) + " (" + why + "): taking it over in place on spare worker " +
                             j.recovery.spare + " with the state of replica " + std::to_string(layout.DataRank(source)) +
                             " (no checkpoint read, no restart counted)");
  }
  ResumeInPlaceLocked(j);
  changed_.notify_all();
  return true;
}

void Coordinator::ResumeInPlaceLocked(JobRecord& j) {
  if (!j.recovery.active || j.recovery.resume_step >= 0) return;
  const int lost = j.recovery.lost;
  // Every rank but the lost one (growing: every rank) has stopped.
  if (static_cast<int>(j.awaiting.size()) < j.world() - (lost >= 0 ? 1 : 0)) return;
  const v1::JobSpec& spec = j.job.spec();
  const RankLayout layout = jobplan::LayoutOf(spec);
  // The furthest commit a survivor passed: every rank entered it, so every survivor can apply it
  // (executor.h); the step after it was in flight and runs again.
  int committed = -1;
  for (const auto& [g, c] : j.awaiting) committed = std::max(committed, c.committed_step());
  bool recomputes = false;
  for (const auto& [g, c] : j.awaiting) {
    if (c.committed_step() != committed && !(c.committed_step() == committed - 1 && c.prepared_step() == committed)) {
      FinishJobLocked(j, v1::FAILED,
                      "in-place recovery of " + j.recovery.lost_name + ": " + layout.Name(g) + " committed step " +
                          std::to_string(c.committed_step()) + " while another committed step " + std::to_string(committed),
                      layout.PipelineRank(g));
      return;
    }
    recomputes = recomputes || c.in_flight_step() == committed + 1;
  }
  const int resume = committed + 1;
  j.recovery.resume_step = resume;
  j.recovery.recomputes = recomputes;
  // Records of committed steps a rank finished but never told (the lost rank's; with a shrink,
  // any rank's, as the old layout ends here): completed from the commits, which carried every
  // rank's loss (the timings and memory of those steps are lost).
  auto complete = [&](int target) {
    if (j.order.open_step(target) > committed) return;
    v1::TelemetryBatch b;
    b.set_job_id(j.job.id());
    b.set_rank(layout.PipelineRank(target));
    b.set_dp_rank(layout.DataRank(target));
    b.set_tp_rank(layout.TensorRank(target));
    b.set_session(j.session);
    const v1::Plan& plan = j.job.plan();  // the head stage's rank holds the loss
    const bool holds_loss = plan.stage_to_rank_size() > 0 &&
                            plan.stage_to_rank(plan.stage_to_rank_size() - 1) == layout.PipelineRank(target);
    int without_loss = 0;
    for (int step = j.order.open_step(target); step <= committed; ++step) {
      v1::StepSummary* s = b.add_steps();
      s->set_step(step);
      for (const auto& [g, c] : j.awaiting) {
        for (const v1::CommitLosses& l : c.losses()) {
          if (l.step() != step) continue;
          for (int k = 0; k < l.global_rank_size(); ++k) {
            if (l.global_rank(k) != target) continue;
            s->set_loss(l.loss(k));
            s->set_has_loss(true);
          }
        }
      }
      without_loss += holds_loss && !s->has_loss();
    }
    if (without_loss > 0) {
      // Older than the commits the survivors keep: those steps' losses miss this rank's replica.
      RecordEventLocked(j, layout.Name(target) + "'s loss of " + std::to_string(without_loss) +
                               " step(s) up to " + std::to_string(committed) + " is lost with it");
    }
    Status st = j.order.Check(target, b, spec.steps(), j.job.plan().ranks(b.rank()).actions_size());
    if (st.ok()) st = AcceptBatchLocked(j, target, b, /*health=*/false);
    if (!st.ok()) {
      RecordEventLocked(j, layout.Name(target) + "'s records of steps up to " + std::to_string(committed) + ": " + st.message());
    }
  };
  if (lost >= 0) complete(lost);
  if (j.recovery.grow) {
    GrowLocked(j, resume);
    return;
  }
  if (j.recovery.shrink) {
    for (int g = 0; g < j.world(); ++g) complete(g);
    ShrinkLocked(j, resume);
    return;
  }
  std::vector<std::string> endpoints;
  const v1::Recovery r = NextGenerationLocked(j, resume, {j.job.worker_ids().begin(), j.job.worker_ids().end()}, &endpoints);
  const int source = layout.AtDataRank(lost, (layout.DataRank(lost) + 1) % layout.dp());
  for (int g = 0; g < j.world(); ++g) {
    RegisteredWorker* w = workers_.Find(j.job.worker_ids(g));
    if (w == nullptr) continue;  // gone meanwhile: its lease loss fails the recovery
    v1::WorkerCommand cmd;
    if (g == lost) {
      v1::Assignment* a = cmd.mutable_assign();
      *a = jobplan::BuildAssignment(j.job.id(), spec, j.job.plan(), g, endpoints, j.session);
      a->set_start_step(resume);
      *a->mutable_recovery() = jobplan::RecoveryFor(r, layout, g);
      a->mutable_recovery()->set_state_from(source);
    } else {
      v1::ResumeInPlace* ri = cmd.mutable_recover();
      ri->set_job_id(j.job.id());
      ri->set_session(j.session);
      *ri->mutable_recovery() = jobplan::RecoveryFor(r, layout, g);
      if (g == source) ri->mutable_recovery()->add_state_to(lost);
    }
    workers_.Queue(*w, std::move(cmd));
  }
  j.awaiting.clear();
  j.monitor->Start(NowNs());  // the pause while the ranks stopped and reconnect is no hang
  RecordEventLocked(j, "every rank resumes at step " + std::to_string(resume) + " (steps before it are committed on all" +
                           (recomputes ? "; the step in flight runs again)" : ")"));
  changed_.notify_all();
}

void Coordinator::AdoptedLocked(JobRecord& j, int g) {
  j.adopted[g] = true;
  if (!std::all_of(j.adopted.begin(), j.adopted.end(), [](bool b) { return b; })) return;
  j.adopting = false;
  j.monitor->Start(NowNs());  // the gap while the coordinator was away is no hang
  RecordEventLocked(j, "re-adopted after the coordinator restart: all " + std::to_string(j.world()) +
                           " rank(s) back, training went on; steps recorded: " + std::to_string(j.job.steps_done()));
}

void Coordinator::EndRecoveryLocked(JobRecord& j) {
  if (j.recovery.active && j.recovery.resume_step < 0) {
    std::vector<std::string> untold = j.recovery.joining;
    if (!j.recovery.spare.empty()) untold.push_back(j.recovery.spare);
    for (const std::string& id : untold) {
      if (RegisteredWorker* w = workers_.Find(id); w != nullptr && w->Holds(j.job.id(), j.session)) workers_.Free(*w);
    }
  }
  j.recovery.active = false;
}

void Coordinator::LetGoLocked(JobRecord& j, const std::string& worker) {
  workers_.Close(worker, j.job.id(), j.session, /*cancel=*/true);
  // Its global rank is another worker's now (or gone with the layout): nothing it still reports
  // or sends counts.
  if (RegisteredWorker* w = workers_.Find(worker); w != nullptr && w->Holds(j.job.id(), j.session)) w->global_rank = -1;
}

v1::Recovery Coordinator::NextGenerationLocked(JobRecord& j, int resume, const std::vector<std::string>& workers,
                                               std::vector<std::string>* endpoints) {
  v1::Recovery r;
  r.set_generation(++j.generation);
  r.set_resume_step(resume);
  r.set_state_from(-1);
  for (int g = 0; g < static_cast<int>(workers.size()); ++g) {
    const RegisteredWorker* w = workers_.Find(workers[g]);
    endpoints->push_back(w != nullptr ? w->info.data_endpoint() : "");
    v1::Peer* p = r.add_peers();
    p->set_global_rank(g);
    p->set_data_endpoint(endpoints->back());
  }
  return r;
}

void Coordinator::ShrinkLocked(JobRecord& j, int resume) {
  const RankLayout old_layout = jobplan::LayoutOf(j.job.spec());
  const int lost = j.recovery.lost, lost_replica = old_layout.DataRank(lost);
  const RankLayout layout = jobplan::LayoutOf(j.recovery.shrunk_spec);
  // Replicas after the lost one move down by one; the lost replica's other ranks are let go.
  std::vector<std::string> workers(layout.world());
  for (int g = 0; g < old_layout.world(); ++g) {
    const int d = old_layout.DataRank(g);
    if (d == lost_replica) {
      if (g != lost) LetGoLocked(j, j.job.worker_ids(g));
      continue;
    }
    workers[layout.Global({old_layout.PipelineRank(g), d < lost_replica ? d : d - 1, old_layout.TensorRank(g)})] =
        j.job.worker_ids(g);
  }
  if (j.grow_dp == 0) {  // the job's size before its first shrink
    j.grow_dp = old_layout.dp();
  }
  ChangePlanInPlaceLocked(j, resume, workers, {});
}

void Coordinator::MaybeGrowLocked(JobRecord& j) {
  const v1::JobSpec& spec = j.job.spec();
  if (j.job.state() != v1::RUNNING || j.grow_dp <= spec.dp() || j.recovery.active || j.adopting || j.drain_step >= 0) return;
  const RankLayout layout = jobplan::LayoutOf(spec);
  const int dp = layout.dp(), m = spec.microbatches();
  if ((dp * m) % (dp + 1) != 0) return;  // one replica more cannot share a step's micro-batches evenly
  v1::JobSpec grown = spec;
  grown.set_dp(dp + 1);
  grown.set_microbatches(dp * m / (dp + 1));
  const bool zero = j.grow_zero > 0;  // a ZeRO job that shrank (RestartSmallerLocked): its stage again
  // A job that shrank in place and then restarted runs this attempt at the smaller size, whose
  // ranks run no step commit: they cannot stop together for a growth in place. It stays.
  if (!zero && !j.commits) return;
  if (zero) {
    // Without checkpoints a ZeRO job's moments cannot be resharded over a new replica: it stays.
    if (spec.checkpoint_every() <= 0) return;
    // Its stop step needs this attempt's pace (StopStepLocked): at least 3 of its steps measured
    // (StepMeasuredLocked asks again at every step).
    if (j.job.steps_size() == 0 || j.job.steps(j.job.steps_size() - 1).step() < j.job.start_step() + 2) return;
  }
  // Cheap checks first: this runs at every measured step of a shrunk ZeRO job, under the lock.
  const int replica = layout.pp() * layout.tp();
  std::vector<RegisteredWorker*> free;
  for (RegisteredWorker* w : workers_.Available(spec.device(), spec.worker().kind())) {
    if (!w->draining) free.push_back(w);
  }
  if (static_cast<int>(free.size()) < replica) return;
  // Every rank stops after one step no rank can have passed.
  const int step = StopStepLocked(j);
  if (step + 2 >= spec.steps()) return;  // nearly done: not worth a stop
  if (zero) grown.set_zero(j.grow_zero);
  if (!jobplan::ValidateJobSpec(grown).ok()) return;
  auto plan = jobplan::PlanJob(grown);
  if (!plan.ok()) return;
  uint64_t need = 0;
  for (uint64_t b : plan->memory_budget_bytes()) need = std::max(need, b);
  std::vector<RegisteredWorker*> joining;
  for (RegisteredWorker* w : free) {
    const uint64_t offered = w->info.device_memory_bytes();
    if ((offered == 0 || offered >= need) && static_cast<int>(joining.size()) < replica) joining.push_back(w);
  }
  if (static_cast<int>(joining.size()) < replica) return;
  if (zero) {
    // The joining workers are not held: the job goes back to the queue at the grown size, first
    // in line for them (and, should another job take them meanwhile, restarts smaller again).
    j.grow_spec = std::move(grown);
    j.grow_plan = std::move(plan).value();
    StopEveryRankAfterAStepLocked(j, "", AfterStop::kGrow);
    return;
  }
  const RankLayout grown_layout = jobplan::LayoutOf(grown);
  j.recovery = JobRecord::Recovery();
  j.recovery.active = true;
  j.recovery.grow = true;
  j.recovery.lost_name = "none (growing back)";
  j.recovery.why = "workers returned";
  j.recovery.began = Clock::now();
  // The stop comes after a step or two: the deadline allows for them.
  double step_s = 0;
  if (j.job.steps_size() > 0) step_s = j.job.steps(j.job.steps_size() - 1).step_time_s();
  j.recovery.deadline = j.recovery.began + std::max<std::chrono::milliseconds>(options_.recovery_grace, 2 * Lease()) +
                        std::chrono::milliseconds(static_cast<int64_t>(3000 * step_s));
  j.recovery.shrunk_spec = grown;
  j.recovery.shrunk_plan = std::move(plan).value();
  std::string names;
  // The new replica's k-th rank: pipeline rank k / tp, tensor rank k % tp (a tp group's workers
  // taken together, in the order they are free).
  for (int r = 0; r < static_cast<int>(joining.size()); ++r) {
    workers_.Assign(*joining[r], j.job.id(), grown_layout.Global({r / layout.tp(), dp, r % layout.tp()}), grown_layout,
                    j.session);  // held for it
    j.recovery.joining.push_back(joining[r]->info.worker_id());
    names += (names.empty() ? "" : ", ") + joining[r]->info.worker_id();
  }
  j.awaiting.clear();
  v1::WorkerCommand halt;
  halt.mutable_halt()->set_job_id(j.job.id());
  halt.mutable_halt()->set_session(j.session);
  halt.mutable_halt()->set_at_step_end(true);
  halt.mutable_halt()->set_step(step);
  TellEveryRankLocked(j, halt);
  j.job.set_recovering("growing back to dp " + std::to_string(dp + 1) + " after step " + std::to_string(step));
  state_.PutJob(j.job, ids_);
  RecordEventLocked(j, "worker(s) " + names + " free: growing back to dp " + std::to_string(dp + 1) + ", " +
                           std::to_string(grown.microbatches()) + " micro-batches per replica (the same global batch); every rank "
                           "stops after step " + std::to_string(step));
  changed_.notify_all();
}

void Coordinator::GrowLocked(JobRecord& j, int resume) {
  const RankLayout old_layout = jobplan::LayoutOf(j.job.spec());
  const RankLayout layout = jobplan::LayoutOf(j.recovery.shrunk_spec);
  // The replicas there are keep their global ranks; the new one is appended, each of its ranks
  // given its stage's state by replica 0's.
  std::vector<std::string> workers(layout.world());
  for (int g = 0; g < old_layout.world(); ++g) workers[g] = j.job.worker_ids(g);
  std::map<int, int> state_from;  // new rank -> replica 0's rank of its stage
  for (int r = 0; r < static_cast<int>(j.recovery.joining.size()); ++r) {
    const int pipeline = r / layout.tp(), tensor = r % layout.tp();
    const int g = layout.Global({pipeline, old_layout.dp(), tensor});
    workers[g] = j.recovery.joining[r];
    state_from[g] = layout.Global({pipeline, 0, tensor});  // the same slices, in replica 0
  }
  if (layout.dp() >= j.grow_dp) j.grow_dp = 0;  // whole again
  ChangePlanInPlaceLocked(j, resume, workers, state_from);
}

void Coordinator::ChangePlanInPlaceLocked(JobRecord& j, int resume, const std::vector<std::string>& workers,
                                          const std::map<int, int>& state_from) {
  const v1::JobSpec& spec = j.recovery.shrunk_spec;
  const RankLayout layout = jobplan::LayoutOf(spec);
  const std::string before =
      "dp " + std::to_string(j.job.spec().dp()) + " x " + std::to_string(j.job.spec().microbatches());
  *j.job.mutable_spec() = spec;
  *j.job.mutable_plan() = j.recovery.shrunk_plan;
  j.job.clear_worker_ids();
  for (const std::string& id : workers) j.job.add_worker_ids(id);
  // The new layout's telemetry from the resume step on; its restart point is the checkpoint each
  // rank saves there under its new global rank (none before it fits the new layout).
  j.outcome = AttemptOutcome(layout.world());
  j.order = TelemetryOrder(layout.world(), resume, layout.pp());
  j.measuring = MeasuringFor(j.job.spec());  // the spec of the new layout
  j.last_checkpoint.assign(layout.world(), -1);
  j.job.set_checkpointed_steps(0);
  state_.PutCheckpointedSteps(j.job.id(), 0);
  j.monitor = std::make_shared<health::JobMonitor>(j.job, options_.metrics);
  j.monitor->Start(NowNs());
  std::vector<std::string> endpoints;
  const v1::Recovery r = NextGenerationLocked(j, resume, workers, &endpoints);
  for (int g = 0; g < layout.world(); ++g) {
    RegisteredWorker* w = workers_.Find(workers[g]);
    if (w == nullptr) continue;  // gone meanwhile: its lease loss fails the attempt
    workers_.Assign(*w, j.job.id(), g, layout, j.session);
    j.monitor->SetDeviceMemory(g, w->info.device_memory_bytes());
    v1::Assignment a = jobplan::BuildAssignment(j.job.id(), spec, j.job.plan(), g, endpoints, j.session);
    a.set_start_step(resume);
    *a.mutable_recovery() = jobplan::RecoveryFor(r, layout, g);
    v1::WorkerCommand cmd;
    if (auto from = state_from.find(g); from != state_from.end()) {
      // A new rank: a fresh assignment, its state from a replica.
      a.mutable_recovery()->set_state_from(from->second);
      *cmd.mutable_assign() = std::move(a);
    } else {
      for (const auto& [to, source] : state_from) {
        if (source == g) a.mutable_recovery()->add_state_to(to);
      }
      v1::ResumeInPlace* ri = cmd.mutable_recover();
      ri->set_job_id(j.job.id());
      ri->set_session(j.session);
      *ri->mutable_recovery() = a.recovery();
      *ri->mutable_reshaped() = std::move(a);
    }
    workers_.Queue(*w, std::move(cmd));
  }
  j.awaiting.clear();
  state_.PutJob(j.job, ids_);
  RecordEventLocked(j, "every rank of the " + std::to_string(layout.dp()) + " replica(s) resumes at step " + std::to_string(resume) +
                           " in the new plan: " + before + " micro-batches -> dp " + std::to_string(layout.dp()) + " x " +
                           std::to_string(spec.microbatches()) + (j.recovery.recomputes ? "; the step in flight runs again" : "") +
                           (j.recovery.shrink ? "; the lost replica's workers are free; the job grows back when enough workers are"
                                              : "; the new replica's ranks get their state from replica 0"));
  changed_.notify_all();
}

void Coordinator::GrowFromCheckpointLocked(JobRecord& j) {
  const int from = j.job.checkpointed_steps(), step = j.drain_step, dp = std::max(1, j.job.spec().dp());
  // The restart point's files: this layout's, or, before it wrote any, the layout's it resumed from.
  if (from > 0 && j.job.checkpoint_dp() == 0) j.job.set_checkpoint_dp(dp);
  const int written_by = std::max(1, j.job.checkpoint_dp());
  *j.job.mutable_spec() = j.grow_spec;
  *j.job.mutable_plan() = j.grow_plan;
  const v1::JobSpec& spec = j.job.spec();
  if (spec.dp() >= j.grow_dp) j.grow_dp = j.grow_zero = 0;  // whole again
  j.last_checkpoint.assign(j.world(), from - 1);
  // The old ranks keep their coordinates in the grown layout (dp is outermost), so each goes back
  // to its worker where it can (QueueAgainLocked keeps them as the previous workers).
  QueueAgainLocked(j, from,
                   "growing back to dp " + std::to_string(spec.dp()) + " x " + std::to_string(spec.microbatches()) +
                       " micro-batches (ZeRO-" + std::to_string(spec.zero()) + "; the same global batch): every rank "
                       "stopped after step " + std::to_string(step) + "; resuming from step " + std::to_string(from) +
                       (from > 0 ? ", each rank gathering its moment shard from the " + std::to_string(written_by) +
                                       " replica(s)' checkpoints of step " + std::to_string(from - 1)
                                 : ""));
}

bool Coordinator::RestartSmallerLocked(JobRecord& j, int free) {
  const v1::JobSpec spec = j.job.spec();
  // A ZeRO job's lost rank cannot be recovered in place (its moment shard is nowhere else): only
  // its restarts shrink, and it grows back from a checkpoint (MaybeGrowLocked).
  if (j.job.restarts() == 0 || spec.zero() < 1 || spec.recovery() == "restart") return false;
  if (!spec.worker().kind().empty() && spec.worker().kind() != "builtin") return false;  // C++ workers reshard
  const RankLayout layout = jobplan::LayoutOf(spec);
  const int dp = layout.dp(), m = spec.microbatches();
  if (dp < 2 || free < j.world() - layout.pp() * layout.tp() || (dp * m) % (dp - 1) != 0) return false;
  // The previous attempt's workers that are still letting it go come back free: wait for them (a
  // ZeRO job that stopped to grow back would otherwise shrink again at once).
  for (const std::string& id : j.previous_workers) {
    const RegisteredWorker* w = workers_.Find(id);
    if (w != nullptr && w->info.job_id() == j.job.id()) return false;
  }
  v1::JobSpec smaller = spec;
  smaller.set_dp(dp - 1);
  smaller.set_microbatches(dp * m / (dp - 1));
  if (dp - 1 == 1) smaller.set_zero(0);  // one replica holds all its moments
  if (!jobplan::ValidateJobSpec(smaller).ok()) return false;
  auto plan = jobplan::PlanJob(smaller);
  if (!plan.ok()) return false;
  const int from = j.job.start_step();
  // The restart point's files stay the ones the old layout wrote until the new one writes its own.
  if (from > 0 && j.job.checkpoint_dp() == 0) j.job.set_checkpoint_dp(dp);
  if (j.grow_dp == 0) {  // the job's size before its first shrink: it grows back when workers return
    j.grow_dp = dp;
    j.grow_zero = spec.zero();
  }
  *j.job.mutable_spec() = std::move(smaller);
  *j.job.mutable_plan() = std::move(plan).value();
  j.ResetAttempt(from);
  j.last_checkpoint.assign(j.world(), from - 1);
  j.previous_workers.clear();  // another layout's ranks
  j.monitor = std::make_shared<health::JobMonitor>(j.job, options_.metrics);
  state_.PutJob(j.job, ids_);
  RecordEventLocked(j, std::to_string(free) + " worker(s) free for " + std::to_string(layout.world()) +
                           " ranks: restarting with one replica fewer, dp " + std::to_string(dp) + " -> " +
                           std::to_string(dp - 1) + ", " + std::to_string(j.job.spec().microbatches()) +
                           " micro-batches per replica (the same global batch)" +
                           (from > 0 ? "; each rank gathers its ZeRO state from the " + std::to_string(dp) +
                                           " replicas' checkpoints of step " + std::to_string(from - 1)
                                     : ""));
  return true;
}

void Coordinator::TryDispatchLocked() {
  // A job a shrink left smaller takes free workers back before a new job does.
  for (auto& jp : jobs_) MaybeGrowLocked(*jp);
  for (auto& jp : jobs_) {
    JobRecord& j = *jp;
    if (j.job.state() != v1::PENDING) continue;
    std::vector<RegisteredWorker*> available = workers_.Available(j.job.spec().device(), j.job.spec().worker().kind());
    // FIFO per device kind is not strict: later jobs may fit.
    if (static_cast<int>(available.size()) < j.world() && !RestartSmallerLocked(j, static_cast<int>(available.size()))) continue;
    // A worker that offers less memory than a rank's budget (what the rank will hold at its peak,
    // jobplan/memory_budget.h) would run out of it: such a job is never dispatched there, and
    // waits, saying why, for workers with room (a worker that reports no memory is not judged).
    uint64_t need = 0;
    for (uint64_t b : j.job.plan().memory_budget_bytes()) need = std::max(need, b);
    if (need > 0) {
      std::vector<RegisteredWorker*> roomy;
      uint64_t largest_short = 0;
      for (RegisteredWorker* w : available) {
        const uint64_t offered = w->info.device_memory_bytes();
        if (offered == 0 || offered >= need) {
          roomy.push_back(w);
        } else {
          largest_short = std::max(largest_short, offered);
        }
      }
      if (static_cast<int>(roomy.size()) < j.world()) {
        const std::string why = "waiting for workers with room: its largest rank budget is " +
                                memory::FormatBytes(static_cast<int64_t>(need)) + ", " +
                                std::to_string(j.world() - static_cast<int>(roomy.size())) +
                                " more worker(s) offering that much are needed (free workers offering less, at most " +
                                memory::FormatBytes(static_cast<int64_t>(largest_short)) + ", are passed over)";
        if (why != j.waiting_reason) {
          j.waiting_reason = why;
          RecordEventLocked(j, why);
        }
        continue;
      }
      available = std::move(roomy);
    }
    j.waiting_reason.clear();
    // Each tensor-parallel group on one host where one has room; a restart keeps each rank's
    // previous worker where it is free (jobplan/placement.h).
    std::vector<jobplan::FreeWorker> hosts;
    for (const RegisteredWorker* w : available) hosts.push_back({w->info.worker_id(), w->info.host()});
    const RankLayout layout = jobplan::LayoutOf(j.job.spec());
    auto placement = jobplan::PlaceRanks(layout, hosts, j.previous_workers);
    if (!placement.ok()) continue;
    std::vector<RegisteredWorker*> free(j.world());
    for (int g = 0; g < j.world(); ++g) free[g] = available[placement->worker_of_rank[g]];
    const v1::JobSpec& spec = j.job.spec();
    j.session = ids_.next_session++;
    for (int g = 0; g < j.world(); ++g) {
      workers_.Assign(*free[g], j.job.id(), g, layout, j.session);
      j.job.add_worker_ids(free[g]->info.worker_id());
    }
    std::vector<std::string> endpoints;
    for (int g = 0; g < j.world(); ++g) endpoints.push_back(free[g]->info.data_endpoint());
    for (int g = 0; g < j.world(); ++g) {
      v1::WorkerCommand cmd;
      *cmd.mutable_assign() = jobplan::BuildAssignment(j.job.id(), spec, j.job.plan(), g, endpoints, j.session);
      cmd.mutable_assign()->set_start_step(j.job.start_step());
      cmd.mutable_assign()->set_checkpoint_dp(j.job.checkpoint_dp());
      workers_.Queue(*free[g], std::move(cmd));
    }
    j.job.set_state(v1::RUNNING);
    j.job.set_session(j.session);
    j.commits = jobplan::RunsStepCommit(spec);
    j.monitor->Start(NowNs());
    for (int g = 0; g < j.world(); ++g) j.monitor->SetDeviceMemory(g, free[g]->info.device_memory_bytes());
    state_.PutJob(j.job, ids_);
    const std::string placed = placement->Summary(layout);
    RecordEventLocked(j, "running on " + std::to_string(j.world()) + " worker(s)" + (placed.empty() ? "" : "; " + placed));
  }
  changed_.notify_all();
}

Status Coordinator::WaitJobUpdates(const std::string& id, size_t* cursor, std::vector<v1::JobUpdate>* out,
                                   Clock::time_point deadline, bool* finished) const {
  std::unique_lock<std::mutex> lock(mu_);
  JobRecord* j = FindJobLocked(id);
  if (j == nullptr) return NotFound("job \"" + id + "\" not found");
  changed_.wait_until(lock, deadline, [&] {
    j = FindJobLocked(id);
    return shutdown_ || j == nullptr || *cursor < j->updates.size();
  });
  if (j == nullptr) return NotFound("job \"" + id + "\" was removed");
  for (; *cursor < j->updates.size(); ++*cursor) out->push_back(j->updates[*cursor]);
  *finished = j->terminal() || shutdown_;
  return Status::Ok();
}

std::vector<v1::WorkerInfo> Coordinator::ListWorkers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return workers_.List(Clock::now());
}

Result<std::string> Coordinator::Trace(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  JobRecord* j = FindJobLocked(id);
  if (j == nullptr) return NotFound("job \"" + id + "\" not found");
  return MeasuredRunTrace(j->job, j->actions, j->action_rank);
}

Result<health::HealthSnapshot> Coordinator::JobHealth(const std::string& id) const {
  std::shared_ptr<health::JobMonitor> monitor;
  {
    std::lock_guard<std::mutex> lock(mu_);
    JobRecord* j = FindJobLocked(id);
    if (j == nullptr) return NotFound("job \"" + id + "\" not found");
    monitor = j->monitor;
  }
  return monitor->Snapshot();  // outside the core lock: it may wait for a round's checks
}

Result<v1::RegisterResponse> Coordinator::Register(const v1::RegisterRequest& r, bool id_from_credentials) {
  if (r.device_kind() != "cpu" && r.device_kind() != "cuda") {
    return InvalidArgument("device_kind: must be \"cpu\" or \"cuda\", got \"" + r.device_kind() + "\"");
  }
  if (!v1::KnownWorkerKind(r.worker_kind())) {
    return InvalidArgument("worker_kind: must be \"builtin\" or \"torch\", got \"" + r.worker_kind() + "\"");
  }
  if (r.data_endpoint().empty() || r.data_endpoint().size() > 256 || r.data_endpoint().find(':') == std::string::npos) {
    return InvalidArgument("data_endpoint: must be HOST:PORT, got \"" + r.data_endpoint() + "\"");
  }
  if (r.host().size() > 256) return InvalidArgument("host: must be at most 256 bytes");
  if (r.worker_id().size() > 128) return InvalidArgument("worker_id: must be at most 128 bytes");
  if (r.held_job_id().size() > 128) return InvalidArgument("held_job_id: must be at most 128 bytes");
  std::lock_guard<std::mutex> lock(mu_);
  std::string id = r.worker_id();
  if (id_from_credentials && (id.empty() || workers_.Find(id) != nullptr)) {
    return FailedPrecondition("worker \"" + id + "\" is registered already with a live lease (another process with " +
                              "its certificate?); it may register again once that lease expires (" +
                              std::to_string(Lease().count()) + " ms without heartbeats)");
  }
  id = workers_.ChooseId(id, &ids_.next_worker);
  PIPECOORD_RETURN_IF_ERROR(state_.PutWorker(id, ids_));
  UpdateLeaseLocked(workers_.size() + 1);  // this worker counted: its first lease is the fleet's
  RegisteredWorker& w = workers_.Add(id, r, Clock::now());
  beats_.Add(id);
  v1::RegisterResponse out;
  out.set_worker_id(id);
  out.set_lease_ms(Lease().count());
  out.set_epoch(ids_.epoch);
  // A worker an adopting attempt waits for, back without it: either its part ended before the
  // restart (it reported success and let the job go; that result was not stored, but its
  // telemetry of every step was, and a worker reports only after all of it is stored), or the
  // previous coordinator died before the worker's command stream carried the assignment (no rank
  // can have got past connecting to it: the attempt goes back to the queue, no restart counted).
  for (auto& jp : jobs_) {
    JobRecord& j = *jp;
    if (!j.adopting || (r.held_job_id() == j.job.id() && r.held_session() == j.session)) continue;
    for (int g = 0; g < j.world(); ++g) {
      if (j.job.worker_ids(g) != id || j.adopted[g]) continue;
      if (j.MeasuredEveryStep(g)) {
        if (j.outcome.Succeeded(g)) {
          FinishJobLocked(j, v1::SUCCEEDED, "", -1);
        } else {
          AdoptedLocked(j, g);
        }
        break;
      }
      LoseWorkerLocked(j, "the coordinator restarted before worker " + id + " got its assignment",
                       jobplan::LayoutOf(j.job.spec()).PipelineRank(g));
      break;
    }
  }
  if (JobRecord* j = r.held_job_id().empty() ? nullptr : FindJobLocked(r.held_job_id());
      j != nullptr && j->adopting && r.held_session() == j->session) {
    // A worker of an attempt this coordinator found running after its restart: it keeps its rank.
    for (int g = 0; g < j->world(); ++g) {
      if (j->job.worker_ids(g) != id || j->adopted[g]) continue;
      workers_.Assign(w, j->job.id(), g, jobplan::LayoutOf(j->job.spec()), j->session);
      j->monitor->SetDeviceMemory(g, w.info.device_memory_bytes());
      out.set_held_job_adopted(true);
      AdoptedLocked(*j, g);
      break;
    }
  }
  TryDispatchLocked();
  return out;
}

Result<v1::HeartbeatResponse> Coordinator::Heartbeat(const v1::HeartbeatRequest& r) {
  const int64_t recv = NowNs();
  // Recorded first, without the core lock: the lease runs from now however busy the core is.
  if (!beats_.Record(r.worker_id(), Clock::now(), recv, r.has_progress() ? &r.progress() : nullptr)) {
    return NotFound("worker \"" + r.worker_id() + "\" is not registered (lease lost?)");
  }
  v1::HeartbeatResponse out;
  // The job fields need the core; while it is busy (another thread holds the lock) the answer
  // carries the lease alone, and the worker keeps what it has (worker.proto, HeartbeatResponse).
  if (std::unique_lock<std::mutex> lock(mu_, std::try_to_lock); lock.owns_lock()) {
    ApplyBeatsLocked();
    const RegisteredWorker* w = workers_.Find(r.worker_id());
    if (JobRecord* j = w == nullptr || w->info.job_id().empty() ? nullptr : FindJobLocked(w->info.job_id()); j != nullptr) {
      out.set_job_id(j->job.id());
      out.set_checkpointed_steps(j->job.checkpointed_steps());
      if (w->session == j->session && w->global_rank >= 0 && w->global_rank < j->world() && !w->info.closing()) {
        out.set_next_telemetry_step(j->order.open_step(w->global_rank));
      }
    }
  }
  out.set_epoch(epoch_);
  out.set_coordinator_recv_ns(recv);
  out.set_coordinator_send_ns(NowNs());
  out.set_lease_ms(Lease().count());
  return out;
}

void Coordinator::UpdateLeaseLocked(size_t workers) {
  int64_t ms = options_.lease.count();
  if (options_.max_heartbeats_per_s > 0) {
    const int64_t n = static_cast<int64_t>(workers);
    ms = std::max<int64_t>(ms, (3000 * n + options_.max_heartbeats_per_s - 1) / options_.max_heartbeats_per_s);
  }
  workers_.set_lease(std::chrono::milliseconds(ms));
  lease_ms_.store(ms, std::memory_order_relaxed);
}

void Coordinator::ApplyBeatsLocked() {
  bool revived = false;
  for (LeaseBoard::Beat& b : beats_.Take()) {
    RegisteredWorker* w = workers_.Find(b.worker_id);
    if (w == nullptr) continue;
    revived |= workers_.Renew(*w, b.at);  // a suspect, alive after all: it may take work again
    if (!b.progress || b.progress->job_id() != w->info.job_id() || w->global_rank < 0 || w->info.closing()) continue;
    // Progress feeds the hang check, which follows wait_peer to the rank waited for: one outside
    // the pipeline is not progress this job can make (the heartbeat still renews the lease).
    JobRecord* j = FindJobLocked(w->info.job_id());
    const int wait_peer = b.progress->wait_peer();
    if (j != nullptr && !j->terminal() && wait_peer >= -1 && wait_peer < j->job.spec().pp()) {
      j->monitor->OnProgress(w->global_rank, *b.progress, b.recv_ns);
    }
  }
  if (revived) TryDispatchLocked();
}

Status Coordinator::WaitCommands(const std::string& worker_id, std::vector<v1::WorkerCommand>* out,
                                 Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  RegisteredWorker* w = workers_.Find(worker_id);
  if (w == nullptr) return NotFound("worker \"" + worker_id + "\" is not registered (lease lost?)");
  changed_.wait_until(lock, deadline, [&] {
    w = workers_.Find(worker_id);
    return shutdown_ || w == nullptr || !w->commands.empty();
  });
  if (w == nullptr) return NotFound("worker \"" + worker_id + "\" lost its lease");
  for (auto& c : w->commands) {
    c.set_epoch(ids_.epoch);
    out->push_back(std::move(c));
  }
  w->commands.clear();
  return Status::Ok();
}

void Coordinator::ReturnCommands(const std::string& worker_id, std::vector<v1::WorkerCommand> commands) {
  std::lock_guard<std::mutex> lock(mu_);
  RegisteredWorker* w = workers_.Find(worker_id);
  if (w == nullptr) return;
  commands.insert(commands.end(), std::make_move_iterator(w->commands.begin()), std::make_move_iterator(w->commands.end()));
  w->commands = std::move(commands);
}

Status Coordinator::ReportResult(const v1::ReportResultRequest& r) {
  std::lock_guard<std::mutex> lock(mu_);
  RegisteredWorker* w = workers_.Find(r.worker_id());
  JobRecord* j = FindJobLocked(r.job_id());
  if (w == nullptr) return NotFound("worker \"" + r.worker_id() + "\" is not registered");
  if (j == nullptr) return NotFound("job \"" + r.job_id() + "\" not found");
  if (j->terminal()) return Status::Ok();  // e.g. a cancelled job's workers reporting late
  if (r.session() != 0 && r.session() != j->session) return Status::Ok();  // an earlier attempt's, stopped
  // Queued again and not running yet: the session is still the stopped attempt's, whose ranks
  // report how they stopped; no attempt runs whose outcome that could be.
  if (j->job.state() == v1::PENDING) return Status::Ok();
  if (w->info.job_id() != r.job_id() || w->info.rank() != r.rank() || w->session != j->session) {
    return PermissionDenied("worker " + r.worker_id() + " does not hold rank " + std::to_string(r.rank()) + " of " + r.job_id());
  }
  // Its part is over (LetGoLocked: let go by a shrink, or a lost worker still alive whose rank a
  // spare took): how it stopped changes nothing.
  if (w->global_rank < 0 || w->global_rank >= j->world()) return Status::Ok();
  if (!r.ok() && r.awaiting_recovery()) {
    // A rank of a job that recovers in place stopped (its data plane broke, or a Halt) and keeps
    // its state: where it stands decides where the job resumes.
    const int g = w->global_rank;
    if (j->recovery.active && g == j->recovery.lost) return Status::Ok();  // the lost rank's own word
    j->awaiting[g] = r.commit();
    if (j->recovery.active) {
      ResumeInPlaceLocked(*j);
      return Status::Ok();
    }
    // Not known yet which rank is lost: the broken links name the suspects (below).
  }
  if (!r.ok() && j->drain_step >= 0 &&
      r.message() == "shutting down: stopped after step " + std::to_string(j->drain_step) + " of " +
                         std::to_string(j->job.spec().steps())) {
    // A rank of a coordinated graceful stop: once every rank stopped there, the job goes back to
    // the queue from the checkpoint they all saved; not a failure, no restart counted.
    j->drained[w->global_rank] = true;
    if (!std::all_of(j->drained.begin(), j->drained.end(), [](bool b) { return b; })) return Status::Ok();
    if (j->drain_then == AfterStop::kCancel) {
      FinishJobLocked(*j, v1::CANCELLED,
                      "cancelled by the user after step " + std::to_string(j->drain_step) + ", checkpointed on every rank",
                      -1);
    } else if (j->drain_then == AfterStop::kGrow) {
      GrowFromCheckpointLocked(*j);
    } else {
      const int step = j->drain_step;
      QueueAgainLocked(*j, j->job.checkpointed_steps(),
                       "drained for worker " + j->drain_worker + "'s shutdown: every rank stopped after step " +
                           std::to_string(step) + "; resuming from step " + std::to_string(j->job.checkpointed_steps()) +
                           (j->job.checkpointed_steps() == step + 1 ? " (their checkpoint)" : " (the last checkpoint every rank has)"));
    }
    return Status::Ok();
  }
  if (!r.ok()) {
    std::string cause = "rank " + std::to_string(r.rank()) + " (" + r.worker_id() + "): " + r.message();
    const std::vector<int> lost(r.unreachable_peers().begin(), r.unreachable_peers().end());
    const auto deadline = Clock::now() + std::min(options_.suspect_grace, options_.lease);
    if (j->outcome.Failed(w->global_rank, cause, lost, deadline)) {
      // The job's own failure, not its workers' (the same message from distinct workers, e.g. out
      // of memory): restarting it elsewhere would only fail, or take down, the next workers too.
      bool restart = true;
      if (lost.empty() && r.message().rfind("stopped", 0) != 0) {
        std::set<std::string>& on = j->failed_on[r.message()];
        on.insert(r.worker_id());
        if (static_cast<int>(on.size()) >= kSameFailureWorkers) {
          restart = false;
          std::string names;
          for (const std::string& id : on) names += (names.empty() ? "" : ", ") + id;
          cause += " (the same failure on " + std::to_string(on.size()) + " workers: " + names + "; not restarted)";
        }
      }
      FinishJobLocked(*j, v1::FAILED, cause, r.rank(), restart);
    }
    return Status::Ok();
  }
  if (j->outcome.Succeeded(w->global_rank)) FinishJobLocked(*j, v1::SUCCEEDED, "", -1);
  return Status::Ok();
}

Result<v1::DrainResponse> Coordinator::Drain(const v1::DrainRequest& r) {
  std::lock_guard<std::mutex> lock(mu_);
  RegisteredWorker* w = workers_.Find(r.worker_id());
  if (w == nullptr) return NotFound("worker \"" + r.worker_id() + "\" is not registered (lease lost?)");
  JobRecord* j = FindJobLocked(r.job_id());
  if (j == nullptr || j->terminal() || j->session != r.session() || !w->Holds(r.job_id(), r.session()) ||
      w->info.closing()) {
    return PermissionDenied("worker " + r.worker_id() + " does not hold a running attempt of " + r.job_id());
  }
  w->draining = true;  // it is shutting down: its job's next attempt must not land on it
  v1::DrainResponse out;
  out.set_stop_after_step(-1);
  const v1::JobSpec& spec = j->job.spec();
  if (spec.checkpoint_every() <= 0 || j->adopting) return out;
  if (j->drain_step >= 0) {  // another of its workers is being drained: the same step
    out.set_stop_after_step(j->drain_step);
    return out;
  }
  out.set_stop_after_step(StopEveryRankAfterAStepLocked(*j, r.worker_id(), AfterStop::kResume));
  return out;
}

int Coordinator::StopEveryRankAfterAStepLocked(JobRecord& j, const std::string& asked_by, AfterStop then) {
  const int step = std::min(StopStepLocked(j), j.job.spec().steps() - 1);
  const bool cancel = then == AfterStop::kCancel;
  j.drain_step = step;
  j.drain_worker = asked_by;
  j.drain_then = then;
  j.drained.assign(j.world(), false);
  v1::WorkerCommand stop;
  stop.mutable_stop_after()->set_job_id(j.job.id());
  stop.mutable_stop_after()->set_session(j.session);
  stop.mutable_stop_after()->set_step(step);
  TellEveryRankLocked(j, stop);
  const std::string who = cancel                     ? std::string("cancelling")
                          : then == AfterStop::kGrow ? "growing back to dp " + std::to_string(j.grow_spec.dp())
                                                     : "worker " + asked_by + " is shutting down";
  RecordEventLocked(j, who + ": every rank stops after step " + std::to_string(step) + " and checkpoints it");
  changed_.notify_all();
  return step;
}

int Coordinator::StopStepLocked(const JobRecord& j) const {
  // One after the furthest step any rank has reported, plus the steps a rank may run while its
  // telemetry and the command are on their way: 0.2 s of the last measured step time, at most 50
  // steps (with 3 ms steps a rank was two steps past the furthest reported when the command came,
  // stopped after another step than its peers, and the drain failed the job).
  int furthest = j.job.start_step();
  for (int g = 0; g < j.world(); ++g) furthest = std::max(furthest, j.order.open_step(g));
  // The fastest of the last 5 measured steps: one slow step (the first after a restart, which
  // loads a checkpoint) gave a margin of one step, and a ZeRO job stopping to grow back saw its
  // ranks stop at different steps.
  int margin = 0;
  double step_s = 0;
  for (int k = std::max(0, j.job.steps_size() - 5); k < j.job.steps_size(); ++k) {
    const double t = j.job.steps(k).step_time_s();
    if (t > 0 && (step_s == 0 || t < step_s)) step_s = t;
  }
  if (step_s > 0) margin = static_cast<int>(std::min(50.0, std::ceil(0.2 / step_s)));
  return furthest + 1 + margin;
}

void Coordinator::TellEveryRankLocked(JobRecord& j, const v1::WorkerCommand& command, const std::function<bool(int g)>& skip) {
  for (int g = 0; g < j.world(); ++g) {
    if (skip && skip(g)) continue;
    RegisteredWorker* w = workers_.Find(j.job.worker_ids(g));
    if (w == nullptr || !w->Holds(j.job.id(), j.session)) continue;
    workers_.Queue(*w, command);
  }
}

void Coordinator::NoteCheckpointLocked(JobRecord& j, int g, int step) {
  if (!j.NoteCheckpoint(g, step)) return;
  state_.PutCheckpointedSteps(j.job.id(), j.job.checkpointed_steps());
  if (j.job.checkpoint_dp() != 0) {  // the restart point is this layout's own checkpoint now
    j.job.set_checkpoint_dp(0);
    state_.PutJob(j.job, ids_);
  }
}

struct Coordinator::StepCheck {
  std::string job_id;
  QueuedStep step;  // its id, record and actions; checked_by: the monitor that checks it
};

void Coordinator::StepMeasuredLocked(JobRecord& j, v1::StepRecord rec, jobplan::StepActions actions) {
  // A step a lost rank's timings are missing from (a recovery completed its record) is recorded
  // but not checked or calibrated on.
  const bool complete = std::none_of(actions.begin(), actions.end(), [](const auto& rank) { return rank.empty(); });
  QueuedStep q;
  q.id = ++j.queued_steps;
  q.record = std::move(rec);
  q.whole = complete;
  if (complete && step_checks_ != nullptr) {  // RunIngestRound checks it outside the lock, then records it
    q.out = true;
    QueuedStep checked;
    checked.id = q.id;
    checked.record = q.record;
    checked.actions = std::move(actions);
    checked.checked_by = j.monitor;
    step_checks_->push_back({j.job.id(), std::move(checked)});
  } else if (complete) {
    q.actions = std::move(actions);
  }
  j.step_queue.push_back(std::move(q));
  RecordQueuedStepsLocked(j);
}

void Coordinator::RecordQueuedStepsLocked(JobRecord& j) {
  // Popped before it is recorded: recording may drop queued steps (a restart it leads to).
  while (!j.step_queue.empty() && !j.step_queue.front().out) {
    QueuedStep q = std::move(j.step_queue.front());
    j.step_queue.pop_front();
    RecordStepLocked(j, std::move(q));
  }
}

void Coordinator::RecordStepLocked(JobRecord& j, QueuedStep&& q) {
  v1::StepRecord& rec = q.record;
  const bool checked_here = q.checked_by == nullptr;
  bool calibrated = q.calibrated;
  if (checked_here && q.whole) calibrated = j.monitor->OnStepMeasured(&rec, q.actions);
  q.actions = {};
  // A round's checks count for the job only if they ran with its current attempt's monitor.
  const bool current = checked_here || q.checked_by == j.monitor;
  if (current && (j.monitor->TakeRebalanceChanged() || calibrated)) {
    // The job keeps the calibration and a rebalance proposal with a gain, as they change.
    if (j.monitor->calibration()) *j.job.mutable_calibration() = *j.monitor->calibration();
    if (j.monitor->rebalance()) {
      *j.job.mutable_rebalance() = *j.monitor->rebalance();
    } else {
      j.job.clear_rebalance();
    }
    state_.PutJob(j.job, ids_);
  }
  if (current && calibrated) {
    const v1::Calibration& c = j.job.calibration();
    char text[240];
    std::snprintf(text, sizeof text,
                  "%s on %d measured step(s) to step %d: predicted step %.4f s (plan %.4f s), bubble rate %.4f (plan %.4f)",
                  c.refreshes() > 0 ? "calibrated again (its steps ran faster than predicted)" : "calibrated",
                  c.steps_measured(), c.last_step(), c.predicted_step_s(), c.plan_step_s(), c.predicted_bubble_rate(),
                  j.job.plan().predicted_bubble_rate());
    RecordEventLocked(j, text);
  }
  *j.job.add_steps() = rec;
  j.job.set_steps_done(j.job.steps_done() + 1);
  state_.AppendStep(j.job.id(), rec);
  PublishLocked(j, j.StepUpdate(rec));
  if (options_.metrics != nullptr) {
    options_.metrics->Step(j.job.id(), rec.step_time_s(), rec.measured_bubble_rate(), rec.predicted_bubble_rate());
    if (rec.has_val_loss()) {
      options_.metrics->Validation(j.job.id(), rec.val_loss(),
                                   jobplan::ByteLevel(j.job.spec()) ? jobplan::BitsPerByte(rec.val_loss()) : -1);
    }
    options_.metrics->Optimizer(j.job.id(), rec.has_grad_norm() ? rec.grad_norm() : -1, rec.learning_rate());
  }
  if (checked_here && q.whole) {
    for (v1::HealthEvent& e : j.monitor->OnStepDone(rec)) RecordHealthEventLocked(j, std::move(e));
  } else if (!checked_here && current) {
    for (v1::HealthEvent& e : q.events) RecordHealthEventLocked(j, std::move(e));
  }
  if (j.recovery.active && j.recovery.resume_step >= 0 && rec.step() >= j.recovery.resume_step) {
    // The first step after an in-place recovery is measured: the job is whole again.
    const double seconds = std::chrono::duration<double>(Clock::now() - j.recovery.began).count();
    const RankLayout layout = jobplan::LayoutOf(j.job.spec());
    if (!j.recovery.grow) j.job.set_recoveries(j.job.recoveries() + 1);  // growing back recovers no rank
    j.job.clear_recovering();
    j.recovery.active = false;
    state_.PutJob(j.job, ids_);
    char text[64];
    std::snprintf(text, sizeof text, "%.2f s", seconds);
    const std::string recomputed = std::string(j.recovery.recomputes ? "1 step" : "no step") + " recomputed, no checkpoint read";
    if (j.recovery.grow) {
      RecordEventLocked(j, "grew back to dp " + std::to_string(layout.dp()) + " in " + text + "; no checkpoint read");
    } else if (j.recovery.shrink) {
      RecordEventLocked(j, "recovered from the loss of " + j.recovery.lost_name + " by going on with dp " +
                               std::to_string(layout.dp()) + " in " + text + "; " + recomputed);
    } else {
      const int source = layout.AtDataRank(j.recovery.lost, (layout.DataRank(j.recovery.lost) + 1) % layout.dp());
      RecordEventLocked(j, "recovered " + j.recovery.lost_name + " on worker " + j.recovery.spare + " from replica " +
                               std::to_string(layout.DataRank(source)) + " in " + text + "; " + recomputed);
    }
    if (options_.metrics != nullptr && !j.recovery.grow) {
      options_.metrics->Recovery(j.job.id(), j.recovery.shrink ? "shrink" : "spare", seconds);
    }
  }
  // A ZeRO job waits for a few measured steps of its attempt before it stops to grow back (below).
  if (j.grow_zero > 0 && j.grow_dp > j.job.spec().dp()) MaybeGrowLocked(j);
}

Status Coordinator::IngestTelemetry(const v1::TelemetryBatch& b, v1::TelemetryAck* ack) {
  std::lock_guard<std::mutex> ingest(ingest_mu_);
  std::vector<TelemetryIn> round(1);
  round[0].batch = &b;
  round[0].ack = ack;
  RunIngestRound(&round, /*try_core=*/false);
  return round[0].status;
}

bool Coordinator::TryIngestTelemetry(const v1::TelemetryBatch& b, v1::TelemetryAck* ack, Status* status) {
  std::unique_lock<std::mutex> ingest(ingest_mu_, std::try_to_lock);
  if (!ingest.owns_lock()) return false;
  std::vector<TelemetryIn> round(1);
  round[0].batch = &b;
  round[0].ack = ack;
  if (!RunIngestRound(&round, /*try_core=*/true)) return false;
  *status = round[0].status;
  return true;
}

void Coordinator::IngestTelemetryRound(std::vector<TelemetryIn>* round) {
  std::lock_guard<std::mutex> ingest(ingest_mu_);
  RunIngestRound(round, /*try_core=*/false);
}

bool Coordinator::RunIngestRound(std::vector<TelemetryIn>* round, bool try_core) {
  // A batch admitted in step 1, by what identifies its rank's attempt (the JobRecord may go while
  // the core lock is let go), with the monitor it is checked with.
  struct Admitted {
    size_t at;
    std::string job_id;
    uint64_t session;
    int g;
    std::shared_ptr<health::JobMonitor> monitor;
    std::vector<v1::HealthEvent> events;  // the checks' (step 3)
  };
  std::vector<Admitted> admitted;
  int64_t now = 0;
  // 1. Under the core lock, each batch admitted as it stands (nothing changes yet); one per rank
  // in a round.
  {
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    if (!try_core) {
      lock.lock();
    } else if (!lock.try_lock()) {
      return false;
    }
    now = NowNs();
    std::set<std::pair<JobRecord*, int>> ranks;
    for (size_t i = 0; i < round->size(); ++i) {
      TelemetryIn& in = (*round)[i];
      in.deferred = false;
      JobRecord* j = nullptr;
      int g = -1;
      bool stored_before = false;
      in.status = AdmitTelemetryLocked(*in.batch, &j, &g, &stored_before, &ranks, &in.deferred);
      if (!in.status.ok() || in.deferred) continue;
      if (stored_before) {  // acknowledged (it is stored), not stored or counted again
        in.ack->set_actions_accepted(in.ack->actions_accepted() + TimedActions(*in.batch));
        in.ack->set_steps_accepted(in.ack->steps_accepted() + in.batch->steps_size());
        continue;
      }
      ranks.insert({j, g});
      admitted.push_back({i, j->job.id(), j->session, g, j->monitor, {}});
    }
  }
  // 2. Stored before they count (and before any ack): nothing acknowledged is lost to a crash.
  // One write for the round (one SQLite transaction), as LevelDB's writers share one log write,
  // made outside the core lock (heartbeats, status calls and ticks go on meanwhile); ingest_mu_
  // keeps other rounds out, so each rank's next batch waits for this one.
  std::vector<TelemetryRow> rows;
  rows.reserve(admitted.size());
  for (const Admitted& a : admitted) rows.push_back({&a.job_id, (*round)[a.at].batch});
  size_t stored_rows = 0;
  const Status stored = state_.AppendTelemetryRows(rows, &stored_rows);
  // 3. The per-batch checks, also outside the core lock (the monitor has its own): before the
  // batch counts, as they ran inside CountBatchLocked before the step it completes is measured.
  for (size_t k = 0; k < admitted.size() && k < stored_rows; ++k) {
    Admitted& a = admitted[k];
    if (a.monitor != nullptr) a.events = a.monitor->OnBatch(a.g, *(*round)[a.at].batch, now);
  }
  // 4. Counted in order, under the core lock. Anything may have changed since step 1 (a batch
  // counted earlier in the round, a tick, a recovery): each is admitted again first (its row,
  // stored, is then one more of the job's rows in the file, as the rows of a replaced attempt
  // are). The round's events and step records are queued, and written after the lock is let go.
  std::vector<StepCheck> step_checks;  // the steps this round measured, for their checks (step 5)
  {
    std::lock_guard<std::mutex> lock(mu_);
    StateWriter::Round writes(&state_, /*deferred=*/true);
    step_checks_ = &step_checks;
    for (size_t k = 0; k < admitted.size(); ++k) {
      Admitted& a = admitted[k];
      TelemetryIn& in = (*round)[a.at];
      if (k >= stored_rows) {
        in.status = stored;
        continue;
      }
      JobRecord* j = nullptr;
      int g = -1;
      bool stored_before = false;
      in.status = AdmitTelemetryLocked(*in.batch, &j, &g, &stored_before, nullptr, nullptr);
      if (in.status.ok() && (stored_before || j->session != a.session || g != a.g)) {
        in.status = FailedPrecondition("rank " + std::to_string(in.batch->rank()) + " of " + in.batch->job_id() +
                                       " changed while its telemetry was stored: send it again");
      }
      if (!in.status.ok()) continue;
      // Checked with this attempt's monitor: its events; a monitor replaced meanwhile checks here.
      const bool checked = a.monitor != nullptr && a.monitor == j->monitor;
      CountBatchLocked(*j, g, *in.batch, /*health=*/true, checked ? &a.events : nullptr);
      in.ack->set_actions_accepted(in.ack->actions_accepted() + TimedActions(*in.batch));
      in.ack->set_steps_accepted(in.ack->steps_accepted() + in.batch->steps_size());
    }
    step_checks_ = nullptr;
  }
  // 5. The checks of the steps measured, outside the core lock, before the next round adds the
  // next step's batches: the calibration and each rank's idle split with the bubble check
  // (OnStepMeasured), then the straggler check over every rank (OnStepDone): at thousands of
  // ranks the costliest work of a step. Then, under the lock, each step is recorded in its job's
  // order (stored, streamed, exported; a step a restart dropped meanwhile is not), its calibration
  // and events applied if the attempt it was checked with is still the job's.
  for (StepCheck& c : step_checks) {
    QueuedStep& q = c.step;
    q.calibrated = q.checked_by->OnStepMeasured(&q.record, q.actions);
    q.actions = {};
    q.events = q.checked_by->OnStepDone(q.record);
  }
  if (!step_checks.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    StateWriter::Round writes(&state_, /*deferred=*/true);
    for (StepCheck& c : step_checks) {
      JobRecord* j = FindJobLocked(c.job_id);
      if (j == nullptr) continue;  // deleted meanwhile
      auto q = std::find_if(j->step_queue.begin(), j->step_queue.end(),
                            [&](const QueuedStep& s) { return s.id == c.step.id; });
      if (q == j->step_queue.end()) continue;  // dropped meanwhile (a restart from before it)
      c.step.whole = q->whole;
      *q = std::move(c.step);  // back in its place, checked (out: false)
      RecordQueuedStepsLocked(*j);
    }
  }
  // 6. The round's events and step records, in one write where the store can.
  state_.Flush();
  return true;
}

Status Coordinator::AdmitTelemetryLocked(const v1::TelemetryBatch& b, JobRecord** job, int* global_rank,
                                         bool* stored_before, const std::set<std::pair<JobRecord*, int>>* in_round,
                                         bool* deferred) {
  RegisteredWorker* w = workers_.Find(b.worker_id());
  if (w == nullptr) return NotFound("worker \"" + b.worker_id() + "\" is not registered");
  JobRecord* j = FindJobLocked(b.job_id());
  if (j == nullptr) return NotFound("job \"" + b.job_id() + "\" not found");
  if (w->info.job_id() != b.job_id() || w->info.rank() != b.rank() || w->dp_rank != b.dp_rank() ||
      w->tp_rank != b.tp_rank()) {
    const bool tp = j->job.spec().tp() > 1 || b.tp_rank() != 0;
    return PermissionDenied("worker " + b.worker_id() + " does not hold rank " + std::to_string(b.rank()) + " (dp " +
                            std::to_string(b.dp_rank()) + (tp ? ", tp " + std::to_string(b.tp_rank()) : "") + ") of " +
                            b.job_id());
  }
  if (j->terminal()) return FailedPrecondition(b.job_id() + " is " + StateName(j->job.state()) + ": no more telemetry");
  if (b.session() != 0 && b.session() != j->session) {
    return FailedPrecondition("session " + std::to_string(b.session()) + " is an earlier attempt of " + b.job_id() +
                              " (restarted); the current one is " + std::to_string(j->session));
  }
  const int g = w->global_rank;
  if (g < 0 || g >= j->world()) {
    // Let go by a shrink, or replaced by a spare while still alive (LetGoLocked).
    return FailedPrecondition("worker " + b.worker_id() + "'s part of " + b.job_id() + " is over: no more telemetry from it");
  }
  // A batch of a step this rank already summarized was stored before: a worker sends again what
  // it could not see acknowledged (a coordinator restart cut its stream). Acknowledged (it is
  // stored), not stored or counted again.
  *job = j;
  *global_rank = g;
  // The rank's earlier batch in this round is not counted yet: this one's order depends on it.
  if (in_round != nullptr && in_round->count({j, g}) > 0) {
    *deferred = true;
    return Status::Ok();
  }
  if (const int step = BatchStep(b); step >= 0 && step < j->order.open_step(g)) {
    *stored_before = true;
    return Status::Ok();
  }
  return j->order.Check(g, b, j->job.spec().steps(), j->job.plan().ranks(b.rank()).actions_size());
}

Status Coordinator::AcceptBatchLocked(JobRecord& j, int g, const v1::TelemetryBatch& b, bool health) {
  // Stored before it counts (and before the ack): nothing acknowledged is lost to a crash.
  PIPECOORD_RETURN_IF_ERROR(state_.AppendTelemetry(j.job.id(), b));
  CountBatchLocked(j, g, b, health);
  return Status::Ok();
}

void Coordinator::CountBatchLocked(JobRecord& j, int g, const v1::TelemetryBatch& b, bool health,
                                   std::vector<v1::HealthEvent>* checked) {
  j.order.Accept(g, b);
  actions_ingested_ += TimedActions(b);
  // The trace keeps whole steps (a folded step's PROBEs alone would draw a step that is not there).
  if (b.totals_size() == 0) {
    for (const v1::ActionTiming& t : b.actions()) j.KeepAction(t, g, options_.trace_actions_per_job);
  }
  std::vector<jobplan::StepActions> measured_actions;
  const std::vector<v1::StepRecord> measured = j.measuring.Add(g, b, &measured_actions);
  if (health) {
    std::vector<v1::HealthEvent> events = checked != nullptr ? std::move(*checked) : j.monitor->OnBatch(g, b, NowNs());
    for (v1::HealthEvent& e : events) RecordHealthEventLocked(j, std::move(e));
  }
  size_t next = 0;  // measured[] follows the batch's summaries
  for (const v1::StepSummary& s : b.steps()) {
    for (int c : s.checkpointed_steps()) NoteCheckpointLocked(j, g, c);
    if (next < measured.size() && measured[next].step() == s.step()) {
      StepMeasuredLocked(j, measured[next], std::move(measured_actions[next]));
      ++next;
    }
  }
}

int64_t Coordinator::ActionsIngested() const {
  std::lock_guard<std::mutex> lock(mu_);
  return actions_ingested_;
}

Result<JobRecord*> Coordinator::PutRendezvousLocked(const std::string& worker_id, const v1::RendezvousRequest& r) {
  if (r.key().empty() || r.key().size() > 256) return InvalidArgument("key: must be 1..256 bytes");
  if (r.value().size() > (1 << 20)) return InvalidArgument("value: must be at most 1 MiB");
  RegisteredWorker* w = workers_.Find(worker_id);
  JobRecord* j = FindJobLocked(r.job_id());
  if (w == nullptr || j == nullptr || w->info.job_id() != r.job_id() || w->info.closing()) {
    return PermissionDenied("worker " + worker_id + " is not part of " + r.job_id());
  }
  if (r.expected() < 1 || r.expected() > j->world()) {
    return InvalidArgument("expected: must be in 1.." + std::to_string(j->world()));
  }
  if (!r.value().empty()) j->rendezvous[r.key()][worker_id] = r.value();
  return j;
}

v1::RendezvousResponse Coordinator::RendezvousAnswerLocked(JobRecord& j, const std::string& key) const {
  v1::RendezvousResponse out;
  for (const auto& [wid, value] : j.rendezvous[key]) (*out.mutable_values())[wid] = value;
  return out;
}

Result<v1::RendezvousResponse> Coordinator::Rendezvous(const std::string& worker_id,
                                                       const v1::RendezvousRequest& r,
                                                       Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto put = PutRendezvousLocked(worker_id, r);
  if (!put.ok()) return put.status();
  JobRecord* j = *put;
  changed_.notify_all();
  const std::string job_id = r.job_id();
  const bool done = changed_.wait_until(lock, deadline, [&] {
    j = FindJobLocked(job_id);
    return shutdown_ || j == nullptr || j->terminal() ||
           static_cast<int>(j->rendezvous[r.key()].size()) >= r.expected();
  });
  if (!done || j == nullptr || shutdown_ || j->terminal()) {
    return Unavailable("rendezvous \"" + r.key() + "\": not every worker arrived in time");
  }
  return RendezvousAnswerLocked(*j, r.key());
}

void Coordinator::RendezvousAsync(const std::string& worker_id, const v1::RendezvousRequest& r, Clock::time_point deadline,
                                  RendezvousDone done) {
  ReadyRendezvous ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto put = PutRendezvousLocked(worker_id, r);
    if (!put.ok()) {
      ready.emplace_back(std::move(done), put.status());
    } else {
      changed_.notify_all();  // a blocking Rendezvous of the same key
      auto key = rendezvous_waiters_.try_emplace({r.job_id(), r.key()}).first;
      key->second.push_back({r.expected(), deadline, std::move(done)});
      SettleRendezvousKeyLocked(key, Clock::now(), &ready);
    }
  }
  for (auto& [d, answer] : ready) d(std::move(answer));
}

void Coordinator::SettleRendezvousLocked(Clock::time_point now, ReadyRendezvous* ready) {
  for (auto it = rendezvous_waiters_.begin(); it != rendezvous_waiters_.end();) it = SettleRendezvousKeyLocked(it, now, ready);
}

Coordinator::RendezvousWaiters::iterator Coordinator::SettleRendezvousKeyLocked(RendezvousWaiters::iterator key,
                                                                                 Clock::time_point now,
                                                                                 ReadyRendezvous* ready) {
  const std::string& name = key->first.second;  // (not a structured binding: lambdas capture it)
  std::vector<RendezvousWaiter>& waiters = key->second;
  JobRecord* j = FindJobLocked(key->first.first);
  auto settled = [&](RendezvousWaiter& w) {
    if (j != nullptr && !shutdown_ && !j->terminal() && static_cast<int>(j->rendezvous[name].size()) >= w.expected) {
      ready->emplace_back(std::move(w.done), RendezvousAnswerLocked(*j, name));
      return true;
    }
    if (j == nullptr || shutdown_ || j->terminal() || now >= w.deadline) {
      ready->emplace_back(std::move(w.done), Unavailable("rendezvous \"" + name + "\": not every worker arrived in time"));
      return true;
    }
    return false;
  };
  waiters.erase(std::remove_if(waiters.begin(), waiters.end(), settled), waiters.end());
  return waiters.empty() ? rendezvous_waiters_.erase(key) : std::next(key);
}

Status Coordinator::Deregister(const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(mu_);
  RegisteredWorker* w = workers_.Find(worker_id);
  if (w == nullptr) return NotFound("worker \"" + worker_id + "\" is not registered");
  const WorkerRegistry::Left left = workers_.Remove(worker_id);
  beats_.Remove(worker_id);
  UpdateLeaseLocked(workers_.size());
  if (JobRecord* j = left.job_id.empty() ? nullptr : FindJobLocked(left.job_id); j != nullptr && !j->terminal()) {
    const std::string why = "worker " + worker_id + " (rank " + std::to_string(left.rank) + ") shut down";
    LoseWorkerLocked(*j, why, left.rank, worker_id);
  }
  changed_.notify_all();
  return Status::Ok();
}

void Coordinator::Tick() {
  ReadyRendezvous ready;
  TickLocked(&ready);
  for (auto& [done, answer] : ready) done(std::move(answer));  // outside the lock
}

void Coordinator::TickLocked(ReadyRendezvous* ready) {
  std::lock_guard<std::mutex> lock(mu_);
  StateWriter::Round events(&state_);  // the tick's events (leases lost, checks): one write
  ApplyBeatsLocked();  // before any lease is found expired
  const auto now = Clock::now();
  SettleRendezvousLocked(now, ready);  // past their deadline, or their job ended
  const std::vector<std::string> expired = workers_.Expired(now);
  for (const std::string& id : expired) {
    const WorkerRegistry::Left left = workers_.Remove(id);  // a worker only closing a job takes nothing with it
    beats_.Remove(id);
    if (JobRecord* j = left.job_id.empty() ? nullptr : FindJobLocked(left.job_id); j != nullptr && !j->terminal()) {
      LoseWorkerLocked(*j, "worker " + id + " (rank " + std::to_string(left.rank) + ") lost its lease", left.rank, id);
    }
  }
  if (!expired.empty()) UpdateLeaseLocked(workers_.size());
  // A job waiting for its previous attempt's workers to let it go (RestartSmallerLocked) stops
  // waiting for one that is gone.
  if (!expired.empty()) TryDispatchLocked();
  bool blamed = false;
  for (auto& jp : jobs_) {
    JobRecord& j = *jp;
    if (!j.adopting || j.terminal() || now < j.adopt_deadline) continue;
    std::string missing;
    int first = -1;
    const RankLayout layout = jobplan::LayoutOf(j.job.spec());
    for (int g = 0; g < j.world(); ++g) {
      if (j.adopted[g]) continue;
      if (first < 0) first = g;
      missing += (missing.empty() ? "" : ", ") + layout.Name(g) + " on " + j.job.worker_ids(g);
    }
    FinishJobLocked(j, v1::FAILED,
                    "the coordinator restarted and " + missing + " did not come back within " +
                        std::to_string(options_.adopt_grace.count()) + " ms",
                    first < 0 ? -1 : layout.PipelineRank(first));
    blamed = true;
  }
  for (auto& jp : jobs_) {
    JobRecord& j = *jp;
    if (j.terminal() || !j.recovery.active || j.recovery.resume_step >= 0 || now < j.recovery.deadline) continue;
    const RankLayout layout = jobplan::LayoutOf(j.job.spec());
    std::string missing;
    for (int g = 0; g < j.world(); ++g) {
      if (g != j.recovery.lost && j.awaiting.count(g) == 0) missing += (missing.empty() ? "" : ", ") + layout.Name(g);
    }
    FinishJobLocked(j, v1::FAILED,
                    "in-place recovery of " + layout.Name(j.recovery.lost) + " (" + j.recovery.why + "): " + missing +
                        " did not stop within " +
                        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(j.recovery.deadline - j.recovery.began).count()) +
                        " ms",
                    -1);
    blamed = true;
  }
  for (auto& jp : jobs_) {
    const AttemptOutcome::Suspicion* overdue = jp->terminal() ? nullptr : jp->outcome.Overdue(now);
    if (overdue == nullptr) continue;
    const int g = overdue->suspect_global;
    const int rank = jobplan::LayoutOf(jp->job.spec()).PipelineRank(g);
    const std::string worker = g < jp->job.worker_ids_size() ? jp->job.worker_ids(g) : "?";
    workers_.MarkSuspect(worker);
    LoseWorkerLocked(*jp,
                     "rank " + std::to_string(rank) + " (" + worker + ", global rank " + std::to_string(g) +
                         ") stopped answering its peers: " + overdue->cause,
                     rank, worker);
    blamed = true;
  }
  if (!expired.empty() || blamed) changed_.notify_all();
  if (options_.metrics != nullptr) {
    // A finished job's last event is its end (FinishJobLocked records it last).
    const int64_t now_ms = NowNs() / 1'000'000;
    for (auto& jp : jobs_) {
      JobRecord& j = *jp;
      if (!j.terminal() || j.metrics_forgotten || j.job.events_size() == 0) continue;
      if (now_ms - j.job.events(j.job.events_size() - 1).unix_ms() < options_.metrics_retention.count()) continue;
      options_.metrics->ForgetJob(j.job.id());
      j.metrics_forgotten = true;
    }
  }
  for (auto& jp : jobs_) {
    // No progress is heard while its workers come back, or while they stop and reconnect around a
    // lost rank.
    if (jp->job.state() != v1::RUNNING || jp->adopting || jp->recovery.active) continue;
    for (v1::HealthEvent& e : jp->monitor->OnTick(NowNs())) RecordHealthEventLocked(*jp, std::move(e));
  }
}

void Coordinator::Shutdown() {
  ReadyRendezvous ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    changed_.notify_all();
    SettleRendezvousLocked(Clock::now(), &ready);
  }
  wakeups_.NotifyAll();
  for (auto& [done, answer] : ready) done(std::move(answer));
}

}  // namespace pipecoord::coordinator
