#include "coordinator/telemetry_order.h"

#include <string>

namespace pipecoord::coordinator {

int BatchStep(const v1::TelemetryBatch& b) {
  if (b.steps_size() > 0) return b.steps(0).step();
  return b.actions_size() > 0 ? b.actions(0).step() : -1;
}

TelemetryOrder::TelemetryOrder(int world, int from_step, int pp)
    : from_step_(from_step), pp_(pp), last_summarized_(world, from_step - 1), open_step_actions_(world, 0) {}

Status TelemetryOrder::Check(int g, const v1::TelemetryBatch& b, int steps, int list) const {
  const int open = open_step(g);
  const std::string who = "rank " + std::to_string(b.rank()) + " (dp " + std::to_string(b.dp_rank()) + ")";
  for (const v1::ActionTiming& t : b.actions()) {
    if (t.step() < 0 || t.step() >= steps) {
      return InvalidArgument("actions: step must be in 0.." + std::to_string(steps - 1) + ", got " + std::to_string(t.step()));
    }
    if (t.step() != open) {
      return InvalidArgument("actions: " + who + " reports step " + std::to_string(open) + " now (steps in order, each once), got step " +
                             std::to_string(t.step()));
    }
    // The health checks name the rank waited for: a pipeline rank of this job, or -1 (none).
    if (t.wait_peer() < -1 || t.wait_peer() >= pp_) {
      return InvalidArgument("actions: wait_peer must be in -1.." + std::to_string(pp_ - 1) + ", got " +
                             std::to_string(t.wait_peer()));
    }
    if (t.start_ns() < 0 || t.end_ns() < t.start_ns()) {
      return InvalidArgument("actions: need 0 <= start_ns <= end_ns, got " + std::to_string(t.start_ns()) + " and " +
                             std::to_string(t.end_ns()));
    }
  }
  if (open_step_actions_[g] + b.actions_size() > list) {
    return InvalidArgument("actions: " + who + " sent " + std::to_string(open_step_actions_[g] + b.actions_size()) + " for step " +
                           std::to_string(open) + ", its job list has " + std::to_string(list));
  }
  for (int i = 0; i < b.steps_size(); ++i) {
    const int step = b.steps(i).step();
    if (step < 0 || step >= steps) {
      return InvalidArgument("steps: step must be in 0.." + std::to_string(steps - 1) + ", got " + std::to_string(step));
    }
    if (step != open + i) {
      return InvalidArgument("steps: " + who + " reports step " + std::to_string(open + i) + " now (steps in order, each once), got step " +
                             std::to_string(step));
    }
    // A checkpoint is of a step this rank has finished: this one or an earlier one.
    for (int c : b.steps(i).checkpointed_steps()) {
      if (c < 0 || c > step) {
        return InvalidArgument("steps[" + std::to_string(i) + "].checkpointed_steps: must be in 0.." + std::to_string(step) +
                               " (steps finished by the summary's step), got " + std::to_string(c));
      }
    }
  }
  return Status::Ok();
}

void TelemetryOrder::Accept(int g, const v1::TelemetryBatch& b) {
  if (b.steps_size() > 0) {
    last_summarized_[g] += b.steps_size();
    open_step_actions_[g] = 0;
  } else {
    open_step_actions_[g] += b.actions_size();
  }
}

bool TelemetryOrder::MeasuredNothing() const {
  for (size_t g = 0; g < last_summarized_.size(); ++g) {
    if (last_summarized_[g] != from_step_ - 1 || open_step_actions_[g] != 0) return false;
  }
  return true;
}

}  // namespace pipecoord::coordinator
