// A memory-capped list scheduler for pipelines with a split backward (vpp = 1), after the
// heuristic of the Zero Bubble paper's automatic scheduling (Qi et al., ICLR 2024, section 3.1):
// every rank runs B as soon as its input gradient is there, runs F while its warm-up depth and
// its memory allow, and fills idle time with W; a W also runs whenever memory needs it before
// the next F. zb-auto searches over the policy below; one call is one candidate schedule.
//
// Each rank decides when it is free, in global time order, using the exact times at which its
// inputs arrive (cost model and comm included). The lists it returns take exactly the times it
// planned when the simulator replays them, and their peak activations (as PeakActivations
// counts them) never exceed the limit.
#ifndef PIPECOORD_SCHEDULES_ZB_LIST_SCHEDULER_H_
#define PIPECOORD_SCHEDULES_ZB_LIST_SCHEDULER_H_

#include <vector>

#include "common/status.h"
#include "schedules/action.h"
#include "schedules/cost_model.h"

namespace pipecoord::schedules {

struct ListPolicy {
  // Per rank: how many forwards may run ahead of their B (the warm-up depth); values < 1 count as 1.
  std::vector<int> max_in_flight;
  // A W goes into an idle gap of at least fill_ratio * w even when it delays the F or B that
  // ends the gap (1: only W's that fit; 0: any gap).
  double fill_ratio = 1.0;
  // With both F and B ready, take the kind not run last (the 1F1B rhythm) rather than B first.
  bool alternate = false;
};

struct ListSchedule {
  std::vector<std::vector<Action>> ranks;  // compute actions (F, B, W), stage = rank
  double makespan = 0;                     // what Simulate reports for these lists
};

// `costs` resolved for a vpp = 1 schedule of `pp` ranks; mem_limit in activation units, at
// least every stage's activation (else INVALID_ARGUMENT). INTERNAL if the lists cannot be
// completed, which would be a bug.
Result<ListSchedule> RunListScheduler(const StageCosts& costs, int pp, int microbatches,
                                      double mem_limit, const ListPolicy& policy);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_ZB_LIST_SCHEDULER_H_
