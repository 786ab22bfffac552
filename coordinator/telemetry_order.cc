#include "coordinator/telemetry_order.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

namespace pipecoord::coordinator {

int BatchStep(const v1::TelemetryBatch& b) {
  if (b.steps_size() > 0) return b.steps(0).step();
  if (b.actions_size() > 0) return b.actions(0).step();
  return b.totals_size() > 0 ? b.totals(0).step() : -1;
}

int TimedActions(const v1::TelemetryBatch& b) {
  int64_t n = b.actions_size();
  for (const v1::ActionTotals& k : b.totals()) n += k.count() > 0 ? k.count() : 0;
  return static_cast<int>(std::min<int64_t>(n, INT32_MAX));
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
  for (int i = 0; i < b.totals_size(); ++i) {
    const v1::ActionTotals& k = b.totals(i);
    const std::string field = "totals[" + std::to_string(i) + "]";
    if (k.step() < 0 || k.step() >= steps) {
      return InvalidArgument(field + ".step: must be in 0.." + std::to_string(steps - 1) + ", got " + std::to_string(k.step()));
    }
    if (k.step() != open) {
      return InvalidArgument(field + ".step: " + who + " reports step " + std::to_string(open) +
                             " now (steps in order, each once), got step " + std::to_string(k.step()));
    }
    if (k.count() < 1) return InvalidArgument(field + ".count: must be at least 1, got " + std::to_string(k.count()));
    if (k.first_start_ns() < 0 || k.last_end_ns() < k.first_start_ns()) {
      return InvalidArgument(field + ": need 0 <= first_start_ns <= last_end_ns, got " + std::to_string(k.first_start_ns()) +
                             " and " + std::to_string(k.last_end_ns()));
    }
    if (k.fastest_ns() < 0 || k.busy_ns() < k.fastest_ns()) {
      return InvalidArgument(field + ": need 0 <= fastest_ns <= busy_ns, got " + std::to_string(k.fastest_ns()) + " and " +
                             std::to_string(k.busy_ns()));
    }
  }
  const int64_t sent = int64_t{open_step_actions_[g]} + TimedActions(b);
  if (sent > list) {
    return InvalidArgument("actions: " + who + " sent " + std::to_string(sent) + " for step " +
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
    open_step_actions_[g] += TimedActions(b);
  }
}

bool TelemetryOrder::MeasuredNothing() const {
  for (size_t g = 0; g < last_summarized_.size(); ++g) {
    if (last_summarized_[g] != from_step_ - 1 || open_step_actions_[g] != 0) return false;
  }
  return true;
}

}  // namespace pipecoord::coordinator
