// StepAggregator: measures the steps of one job attempt from its ranks' telemetry. Each rank's
// batches bring the timings of its actions and its step summaries; once every rank has
// summarized a step, the step is measured (and forgotten here):
//   step time    = the latest action end - the earliest action start, over all ranks (s)
//   bubble rate  = 1 - compute busy time / (ranks x step time)    (0 when the step time is 0)
//   loss         = the mean of the losses reported (0 when no rank reported one), added in global
//                  rank order: the same bits whatever order the ranks' telemetry arrived in
//   val loss     = the mean of the validation losses reported (each replica's head rank), when
//                  any, in the same order
//   peak memory  = each rank's reported peak, by global rank (bytes)
// and, for the calibration and the idle split (jobplan/calibration.h), each rank's actions of
// the step as reported (in list order). A rank may fold a step's actions into per-kind totals
// (ActionTotals, jobplan/telemetry_detail.h): the step time and busy time count them the same,
// and the step comes out with no actions (an empty StepActions: measured, not calibrated on).
// With a tensor-parallel speaker group of `tp_speaker` ranks, a rank other than its group's first
// may send no timings: it counts as that rank's (lockstep), busy time and actions alike. A step
// where a speaking rank sent no timings (a recovery completed its record) comes out with that
// rank's actions empty. A step that only the first data-parallel replica (global ranks below
// `replica`, its pp x tp ranks) sent whole comes out with that replica's actions only.
// Pure, no lock: the Coordinator keeps one per job and calls it under its own, with batches
// TelemetryOrder accepted (each rank summarizes each step once).
#ifndef PIPECOORD_COORDINATOR_STEP_AGGREGATOR_H_
#define PIPECOORD_COORDINATOR_STEP_AGGREGATOR_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "jobplan/calibration.h"
#include "proto/job.pb.h"
#include "proto/telemetry.pb.h"

namespace pipecoord::coordinator {

class StepAggregator {
 public:
  // `tp_speaker`: the tensor-parallel group size when its rank 0 speaks for it, else 1;
  // `replica`: the ranks of one data-parallel replica (0: the world).
  explicit StepAggregator(int world = 0, int tp_speaker = 1, int replica = 0)
      : world_(world), speaker_group_(std::max(1, tp_speaker)), replica_(replica > 0 ? replica : world) {}

  // Adds one rank's batch; returns the steps it completed (every rank has summarized them), in
  // the order of the batch's summaries. `actions`, when given, gets each completed step's
  // actions by global rank, parallel to the result.
  std::vector<v1::StepRecord> Add(int global_rank, const v1::TelemetryBatch& batch,
                                  std::vector<jobplan::StepActions>* actions = nullptr);
  // Steps with some telemetry that not every rank has summarized yet.
  size_t open_steps() const { return steps_.size(); }

 private:
  struct Step {
    int reports = 0;
    std::map<int, double> losses, val_losses;  // by global rank
    bool has_grad_norm = false;
    double grad_norm = 0, learning_rate = 0;
    int64_t min_start = INT64_MAX, max_end = INT64_MIN;
    std::vector<double> busy_ns;  // by global rank (a sum of int64 durations could overflow)
    std::vector<char> timed;      // by global rank: sent actions or totals
    std::vector<char> folded;     // by global rank: sent totals
    std::vector<uint64_t> peaks;  // by global rank
    jobplan::StepActions actions;  // by global rank
  };

  Step& At(int step);

  int world_;
  int speaker_group_;
  int replica_;
  std::map<int, Step> steps_;
};

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_STEP_AGGREGATOR_H_
