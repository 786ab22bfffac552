// TelemetryOrder: the order in which the ranks of one job attempt report their telemetry. A rank
// reports its steps in order, each once: at most its job list's actions for its open step (the
// one after the last it summarized), each whole or folded into per-kind totals, then that step's
// summary. A batch is checked whole before
// any of it counts, so a refused batch leaves nothing behind, and a worker that resends or runs
// ahead cannot grow the job past its spec (one record per step). Pure, no lock: the Coordinator
// keeps one per job and calls it under its own.
#ifndef PIPECOORD_COORDINATOR_TELEMETRY_ORDER_H_
#define PIPECOORD_COORDINATOR_TELEMETRY_ORDER_H_

#include <vector>

#include "common/status.h"
#include "proto/telemetry.pb.h"

namespace pipecoord::coordinator {

// The step a batch reports: its first summary's, else its first action's; -1 for an empty batch.
int BatchStep(const v1::TelemetryBatch& batch);
// The actions a batch times: those sent whole and those folded into its totals.
int TimedActions(const v1::TelemetryBatch& batch);

class TelemetryOrder {
 public:
  // `world` ranks (by global rank) that report from `from_step` on, in a pipeline of `pp` ranks
  // (what an action's wait_peer may name).
  explicit TelemetryOrder(int world = 0, int from_step = 0, int pp = 1);

  // OK when `global_rank` may send `batch` now; else INVALID_ARGUMENT saying what it must send
  // (or which field is out of range).
  // `steps`: the job's step count; `list_actions`: the rank's job list size. Changes nothing.
  Status Check(int global_rank, const v1::TelemetryBatch& batch, int steps, int list_actions) const;
  // Counts a batch Check accepted.
  void Accept(int global_rank, const v1::TelemetryBatch& batch);

  // After a coordinator restart: `global_rank` had summarized steps up to `last_summarized` and
  // sent `open_step_actions` actions of the step after it (from the stored batches).
  void Resume(int global_rank, int last_summarized, int open_step_actions) {
    last_summarized_[global_rank] = last_summarized;
    open_step_actions_[global_rank] = open_step_actions;
  }
  // The step `global_rank` reports now.
  int open_step(int global_rank) const { return last_summarized_[global_rank] + 1; }
  // No rank has reported an action or a step since from_step.
  bool MeasuredNothing() const;

 private:
  int from_step_;
  int pp_;
  std::vector<int> last_summarized_;    // by global rank
  std::vector<int> open_step_actions_;  // by global rank: actions received for its open step
};

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_TELEMETRY_ORDER_H_
