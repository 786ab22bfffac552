// TelemetryDetail: which steps a rank reports action by action, and which ranks speak for their
// tensor-parallel group (HealthConfig's detail_* and tp_speaker; docs/monitoring.md, "Telemetry
// detail"). A worker folds the other steps' actions into per-kind totals (ActionTotals): what the
// coordinator sums every step (step time, busy time, the straggler check's fastest pace) at a
// tenth of the records, while the checks that read each action (calibration, the idle split,
// the bubble check, the Perfetto trace, the action histograms) read the detailed steps.
// Pure; the worker daemon and the coordinator's tests use the same functions.
#ifndef PIPECOORD_JOBPLAN_TELEMETRY_DETAIL_H_
#define PIPECOORD_JOBPLAN_TELEMETRY_DETAIL_H_

#include <vector>

#include "proto/job.pb.h"
#include "proto/telemetry.pb.h"

namespace pipecoord::jobplan {

// Jobs up to this many ranks send every step in detail by default (as before the totals).
inline constexpr int kDetailEveryStepUpToRanks = 512;
// Past it, every this-many-th step is detailed by default.
inline constexpr int kDefaultDetailEvery = 16;

struct TelemetryDetail {
  int every = 1;        // every k-th step (step % k == 0) in detail
  int first = 0;        // steps [0, first) in detail: the warm-up and the calibration's steps
  int from = 0;         // a window [from, from + steps) in detail (a complete trace there)
  int steps = 0;
  bool tp_speaker = false;  // tp rank 0 speaks for its group's timings
  bool first_replica = false;  // only data-parallel replica 0 sends whole steps

  bool InDetail(int step) const {
    return step < first || (every > 0 && step % every == 0) || (step >= from && step < from + steps);
  }
  // Whether replica `dp_rank` sends `step` whole.
  bool InDetail(int step, int dp_rank) const { return InDetail(step) && (!first_replica || dp_rank == 0); }
  // Whether a rank of tensor-parallel rank `tp_rank` sends its timings.
  bool Speaks(int tp_rank) const { return !tp_speaker || tp_rank == 0; }
};

// The spec's policy with its defaults applied (by the job's world size).
TelemetryDetail TelemetryDetailOf(const v1::JobSpec& spec);

// The tensor-parallel group size when its rank 0 speaks for it (StepAggregator's), else 1.
int SpeakerGroup(const v1::JobSpec& spec);

// Puts one step's actions (as the rank ran them, in list order) into `batch` per `detail`: all of
// them in `actions` on a step its replica sends whole; else PROBEs in `actions` and the rest folded
// into `totals` (one per stage and op, in first-seen order); nothing when the rank does not speak.
void PutStepTimings(const TelemetryDetail& detail, int dp_rank, int tp_rank, int step,
                    std::vector<v1::ActionTiming> actions, v1::TelemetryBatch* batch);

// Folds `t` into `totals` (count 0 on entry: a new kind).
void FoldAction(const v1::ActionTiming& t, v1::ActionTotals* totals);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_TELEMETRY_DETAIL_H_
