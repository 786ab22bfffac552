// Straggler check: per-rank performance scores in [0, 1] for each compute kind (F, B, W, BW),
// as NVIDIA's nvidia-resiliency-ext straggler detector defines them (docs/monitoring.md):
//   relative   = fastest rank's median / this rank's median
//   individual = this rank's best median / its current median
// A median is taken over the rank's actions of that kind in the last `straggler_window` steps,
// each action's duration divided by its predicted cost (so ranks holding different amounts of
// the model compare fairly); "best" is the lowest median of the non-overlapping full windows
// seen so far (one candidate every `straggler_window` steps: the minimum of fewer, independent
// medians is not dragged down by noise the way a sliding minimum is). A rank is flagged when a
// score stays under the threshold for kRelativePersistence consecutive steps (relative) or a
// whole window (individual: a rank's own pace drifts with the machine for a few steps at a
// time; a window-long drop is a slowdown), and only when the rank's median action is at least
// straggler_min_delta_s slower than the reference (below that, scheduler jitter on a shared CPU
// moves sub-millisecond actions by tens of percent); one event per episode.
#ifndef PIPECOORD_COORDINATOR_HEALTH_STRAGGLER_CHECK_H_
#define PIPECOORD_COORDINATOR_HEALTH_STRAGGLER_CHECK_H_

#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "jobplan/health_settings.h"
#include "proto/health.pb.h"
#include "proto/schedule.pb.h"

namespace pipecoord::coordinator::health {

struct StragglerScore {
  int global_rank = 0;
  v1::Op op = v1::F;
  double median = 0;       // seconds per cost unit
  double mean_cost = 0;    // the kind's mean predicted cost on this rank (cost units)
  double best = 0;         // the individual score's reference (0: none yet)
  double relative = 1;
  double individual = 1;
};

inline constexpr int kRelativePersistence = 2;

class StragglerCheck {
 public:
  StragglerCheck(const jobplan::HealthSettings& settings, int pp, int world);

  // One measured compute action: its seconds per predicted cost unit, and that cost.
  void Add(int global_rank, int step, v1::Op op, double seconds_per_cost, double cost);
  // Scores every rank after `step` completed; events for ranks newly under the threshold.
  std::vector<v1::HealthEvent> Evaluate(int step);
  // The scores of the last Evaluate.
  const std::vector<StragglerScore>& scores() const { return scores_; }
  // The fastest rank's median over all its compute kinds in the window (seconds per cost
  // unit), the scale that turns the plan's cost units into seconds; 0 before any data.
  double FastestMedian() const;

 private:
  struct Series {
    std::deque<std::pair<int, double>> values;  // (step, seconds per cost), oldest first
    double best = 0;                            // lowest full-window median; 0: none yet
    int best_at = -1;                           // the step that window ended at
    double cost_sum = 0;                        // predicted costs added, for the mean action
    int64_t cost_count = 0;
    double mean_cost() const { return cost_count ? cost_sum / cost_count : 0; }
  };
  void Prune(Series& s, int step) const;

  jobplan::HealthSettings settings_;
  int pp_, world_;
  int latest_step_ = -1;
  std::map<std::pair<int, int>, Series> series_;  // (global rank, op) -> values
  std::vector<bool> flagged_;
  std::vector<int> relative_low_, individual_low_;  // consecutive steps under the threshold
  std::vector<StragglerScore> scores_;
};

}  // namespace pipecoord::coordinator::health

#endif  // PIPECOORD_COORDINATOR_HEALTH_STRAGGLER_CHECK_H_
