#include "coordinator/job_record.h"

#include "jobplan/telemetry_detail.h"

#include <algorithm>

namespace pipecoord::coordinator {

StepAggregator MeasuringFor(const v1::JobSpec& spec) {
  const RankLayout layout = jobplan::LayoutOf(spec);
  return StepAggregator(layout.world(), jobplan::SpeakerGroup(spec), layout.pp() * layout.tp());
}

bool JobRecord::terminal() const {
  const v1::JobState s = job.state();
  return s == v1::SUCCEEDED || s == v1::FAILED || s == v1::CANCELLED;
}

void JobRecord::ResetAttempt(int from_step) {
  outcome = AttemptOutcome(world());
  order = TelemetryOrder(world(), from_step, job.spec().pp());
  measuring = MeasuringFor(job.spec());
  drain_step = -1;
  drain_worker.clear();
  drain_then = AfterStop::kResume;
  drained.clear();
  recovery = Recovery();
  job.clear_recovering();
  awaiting.clear();
  generation = 0;
}

void JobRecord::DropStepsFrom(int from) {
  auto* steps = job.mutable_steps();
  steps->erase(std::remove_if(steps->begin(), steps->end(), [&](const v1::StepRecord& r) { return r.step() >= from; }),
               steps->end());
  job.set_steps_done(steps->size());
  step_queue.erase(std::remove_if(step_queue.begin(), step_queue.end(),
                                  [&](const QueuedStep& q) { return q.record.step() >= from; }),
                   step_queue.end());
}

bool JobRecord::NoteCheckpoint(int g, int step) {
  last_checkpoint[g] = std::max(last_checkpoint[g], step);
  const int covered = *std::min_element(last_checkpoint.begin(), last_checkpoint.end()) + 1;
  if (covered == job.checkpointed_steps()) return false;
  job.set_checkpointed_steps(covered);
  return true;
}

void JobRecord::KeepAction(const v1::ActionTiming& t, int g, size_t cap) {
  if (actions.size() >= cap) {
    const size_t half = actions.size() / 2;
    actions.erase(actions.begin(), actions.begin() + half);
    action_rank.erase(action_rank.begin(), action_rank.begin() + half);
  }
  actions.push_back(t);
  action_rank.push_back(g);
}

void JobRecord::TrimActions(size_t cap) {
  if (actions.size() <= cap) return;
  const size_t drop = actions.size() - cap;
  actions.erase(actions.begin(), actions.begin() + drop);
  action_rank.erase(action_rank.begin(), action_rank.begin() + drop);
}

v1::JobUpdate JobRecord::StepUpdate(const v1::StepRecord& rec) const {
  v1::JobUpdate u;
  u.set_state(job.state());
  u.set_step(rec.step());
  u.set_loss(rec.loss());
  u.set_step_time_s(rec.step_time_s());
  u.set_measured_bubble_rate(rec.measured_bubble_rate());
  if (rec.has_val_loss()) {
    u.set_val_loss(rec.val_loss());
    u.set_has_val_loss(true);
  }
  if (rec.has_grad_norm()) {
    u.set_grad_norm(rec.grad_norm());
    u.set_has_grad_norm(true);
  }
  u.set_learning_rate(rec.learning_rate());
  // The record's own prediction (calibrated once the job is); older records carry none.
  u.set_predicted_bubble_rate(rec.predicted_step_s() > 0 ? rec.predicted_bubble_rate() : job.plan().predicted_bubble_rate());
  return u;
}

}  // namespace pipecoord::coordinator
