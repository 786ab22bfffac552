// Cost-aware replay: a handcrafted order (zbv, v-half, v-min, zbh1, ...) is written for even
// costs; with the real F/B/W/comm costs the list scheduler (zb_list_scheduler.h) follows its
// F's and B's as a guide and places the W's where the cost model says they fill idle time,
// never above given per-rank activation limits. The shortest of the order itself and its
// replays wins.
//
// "Shortest" everywhere in the schedule engine's searches: the longest rank span (first start
// to last end on one rank, the Zero Bubble paper's measure), then the makespan; a later
// candidate must win by more than 1e-9 relative to replace an earlier one.
#ifndef PIPECOORD_SCHEDULES_COST_REPLAY_H_
#define PIPECOORD_SCHEDULES_COST_REPLAY_H_

#include <string>
#include <vector>

#include "common/status.h"
#include "schedules/cost_model.h"
#include "schedules/schedule.h"
#include "schedules/simulator.h"

namespace pipecoord::schedules {

// What the searches compare: the longest rank span, then the makespan.
struct StepTime {
  double span = 0;
  double makespan = 0;
};

StepTime MeasureStepTime(const Simulation& sim);

// True when `a` is shorter than `b` by more than rounding (1e-9 relative), span first.
bool Shorter(const StepTime& a, const StepTime& b);

// Each rank's peak activations in `schedule` (PeakActivations with `costs`).
std::vector<double> RankPeaks(const Schedule& schedule, const CostModel& costs);

// The least longest-rank span and makespan any schedule of `shape`'s placement (stage_to_rank,
// microbatches) can have with stage costs `c`: the most work any rank has; for the makespan, the
// most any rank has after the earliest its first input can arrive (micro-batch 0's F's down the
// stages), or after the earliest a stage's first output gradient can (its F's down every stage
// and its B's back), the B's and W's of that stage and of the rank's later ones.
StepTime LeastStepTime(const Schedule& shape, const StageCosts& c);

// True when `t` is at the least (LeastStepTime) in both terms, to Shorter's rounding: no
// schedule of the shape is Shorter than it.
bool ReachesLeastStepTime(const StepTime& t, const StepTime& least);

// `order` (compute actions only, each stage's F's and B's in micro-batch order) and its
// replays under `rank_limits` (one per rank): the shortest with `costs`, as a schedule of the
// same shape. `order` itself is kept on ties, and also when it is above the limits (the
// replays never are); so when it already reaches the least step time nothing is replayed
// (`shortcut` false: replayed anyway, for the tests that check the shortcut changes nothing).
// INVALID_ARGUMENT for a bad order or cost model.
Result<Schedule> BestReplay(const Schedule& order, const CostModel& costs, const std::vector<double>& rank_limits,
                            bool shortcut = true);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_COST_REPLAY_H_
