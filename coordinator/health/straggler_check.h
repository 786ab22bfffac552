// Straggler check: tells a persistently slow rank from scheduler noise (docs/monitoring.md,
// "Straggler check", has the measurements behind each choice).
//
// Every compute action's duration is divided by its predicted cost (seconds per cost unit, so
// ranks holding different amounts of the model compare). Noise on a shared machine only ever
// adds time (an action that waits for a core or a cache runs longer, never shorter), so a rank's
// pace is its FASTEST action, not its median:
//   best(g, op)   the fastest `op` action of rank g since the warm-up: its baseline
//   recent(g, op) the fastest in the last `straggler_window` steps
//   drift(g, op)  = recent / best (1: as fast as it ever was)
// and, per rank and kind, two scores in [0, 1] named as nvidia-resiliency-ext's:
//   relative   = median over the other ranks of best(g', op) / best(g, op)
//                (slower than its peers from the start: a slow device)
//   individual = median over the other ranks of drift(g', op) / drift(g, op)
//                (slower than its own baseline while its peers are not: a rank that slowed
//                down; a machine-wide slowdown moves every rank's drift alike and scores 1).
//                A rank already flagged is judged against its own pace when it was flagged (its
//                new normal): its drift as a peer is max(1, recent / recent-when-flagged), so a
//                known straggler neither hides a later slowdown of another rank (in a 2-rank
//                pipeline it is that rank's only peer) nor makes a healthy rank look slow.
// A persistently slow rank is slow in every kind of action it runs, while contention hits one
// kind at a time (a rank's forwards may overlap its neighbours' work for several steps while its
// backwards do not). So a rank's score is its HIGHEST over its kinds, and a rank is slow in a
// step when its relative or its individual score is under `straggler_threshold` and its actions
// are at least `straggler_min_delta_s` slower than the reference (below that, the slowdown is not
// worth an alarm). It is flagged when it is slow in kStragglerPersistence of the last
// kStragglerLookback scored steps (one step of noise neither raises nor delays the event), and
// the episode ends once it has not been slow for straggler_window + 1 scored steps in a row (as
// long as a slowdown must last to be flagged): one event per episode. Scores are evaluated from
// step warmup_steps + calibration_steps on (the baseline steps, as the calibration uses). A job
// with one rank has no peers and is never flagged.
//
// A third rule finds a slowdown too small for the scores (a 1.3x slower rank scores 0.77, above
// the threshold, which must stay under what noise alone scores on a loaded machine) but that
// lasts: a one-sided CUSUM change-point detector per rank (Page 1954) on how much slower than its
// own baseline the rank is than its peers are than theirs, step by step:
//   pace(g, op, t)   the fastest `op` action of rank g in the `straggler_window` steps up to t
//                    (seconds per cost unit: `recent` above)
//   base(g, op)      the fastest pace over kCusumBaselineSteps steps from the first scored step,
//                    and since (noise only adds time; a baseline taken in noisy steps would hide
//                    a slowdown behind it); taken again from the step after a flag (the new normal)
//   x(g, t)          = min over kinds of [ log(pace / base) - median over the other ranks of
//                      max(0, log(pace' / base')) ]   (slower in every kind; a peer faster than
//                      its baseline counts as at it, so a straggler's recovery accuses no one)
//   S(g, t)          = max(0, S(g, t-1) + min(x(g, t), kCusumStepCap) - kCusumDrift), flagged
//                      when S > kCusumLimit
// (the cap: one step, one slow window, adds at most 0.27), and the rank's slowdown adds up to at least `straggler_min_delta_s` a step (over its actions:
// the scores' floor is per action). kCusumDrift is half a 1.3x shift (log 1.3 / 2): a sustained
// 1.3x adds 0.13 a step and is flagged 7 steps after the window holds only slow steps; 1.5x in 3
// (the scores find it at the same time); contention must keep every action of every kind of a
// rank 1.5x slower for 3 steps in a row to reach the limit. bench/fault_matrix_bench: no alarm in
// 30 clean jobs of 60 steps (demo, pp 2, pp 8), 1.3x found 9-12 steps in (docs/monitoring.md).
#ifndef PIPECOORD_COORDINATOR_HEALTH_STRAGGLER_CHECK_H_
#define PIPECOORD_COORDINATOR_HEALTH_STRAGGLER_CHECK_H_

#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "common/rank_layout.h"
#include "jobplan/health_settings.h"
#include "proto/health.pb.h"
#include "proto/schedule.pb.h"

namespace pipecoord::coordinator::health {

struct StragglerScore {
  int global_rank = 0;
  v1::Op op = v1::F;
  double recent = 0;      // seconds per cost unit: the fastest action in the window
  double best = 0;        // seconds per cost unit: the fastest since the warm-up
  double median = 0;      // seconds per cost unit: the window's median (the scale, not a score)
  double mean_cost = 0;   // the kind's mean predicted cost on this rank (cost units)
  double relative = 1;
  double individual = 1;
};

// A rank is flagged when slow in kStragglerPersistence of its last kStragglerLookback scored steps.
inline constexpr int kStragglerPersistence = 2;
inline constexpr int kStragglerLookback = 3;
// The change-point rule (above).
inline constexpr int kCusumBaselineSteps = 4;
inline constexpr double kCusumDrift = 0.1312;  // log(1.3) / 2
inline constexpr double kCusumStepCap = 0.4055;  // log(1.5)
inline constexpr double kCusumLimit = 0.8;

class StragglerCheck {
 public:
  StragglerCheck(const jobplan::HealthSettings& settings, const RankLayout& layout);

  // One measured compute action: its seconds per predicted cost unit, and that cost.
  void Add(int global_rank, int step, v1::Op op, double seconds_per_cost, double cost);
  // Scores every rank after `step` completed; events for ranks newly flagged.
  std::vector<v1::HealthEvent> Evaluate(int step);
  // The scores of the last Evaluate.
  const std::vector<StragglerScore>& scores() const { return scores_; }
  // The fastest rank's median over all its compute kinds in the window (seconds per cost
  // unit), the scale that turns the plan's cost units into seconds; 0 before any data.
  double FastestMedian() const;
  // The first step scored.
  int FirstScoredStep() const { return settings_.warmup_steps + settings_.calibration_steps; }

 private:
  struct Series {
    std::deque<std::pair<int, double>> values;  // (step, seconds per cost) in the window, oldest first
    double best = 0;                            // 0: nothing yet
    double flagged_pace = 0;                    // `recent` when its rank was flagged (0: not flagged)
    double cost_sum = 0;                        // predicted costs added, for the mean action
    int64_t cost_count = 0;
    double mean_cost() const { return cost_count ? cost_sum / cost_count : 0; }
  };
  void Prune(Series& s, int step) const;
  // The change-point rule's statistic for `step`; events for ranks it newly flags.
  void Cusum(int step, std::vector<v1::HealthEvent>* events);
  // Starts rank g's change-point baseline again from the next step (at a flag).
  void Rebaseline(int g, int step);

  jobplan::HealthSettings settings_;
  RankLayout layout_;
  int world_;
  int latest_step_ = -1;
  std::map<std::pair<int, int>, Series> series_;  // (global rank, op) -> values
  std::vector<bool> flagged_;
  std::vector<unsigned> slow_bits_;  // bit k: slow k scored steps ago
  std::vector<int> fine_;             // consecutive scored steps not slow
  std::vector<StragglerScore> scores_;
  // The change-point rule, per rank: per kind the step paces of the baseline being taken, then
  // its median; the statistic; where the baseline starts.
  struct Change {
    std::map<int, std::vector<double>> baseline_paces;  // op -> paces
    std::map<int, double> base;                          // op -> median (empty: still taking it)
    int baseline_from = -1;                              // first step of the baseline
    double s = 0;
    int rising_since = -1;  // the step S last left 0
  };
  std::vector<Change> change_;
};

}  // namespace pipecoord::coordinator::health

#endif  // PIPECOORD_COORDINATOR_HEALTH_STRAGGLER_CHECK_H_
