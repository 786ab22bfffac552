// A memory-capped list scheduler for pipelines with a split backward, on any placement of
// virtual stages on ranks (flat, V, interleaved), after the heuristic of the Zero Bubble
// paper's automatic scheduling (Qi et al., ICLR 2024, section 3.1): every rank runs B as soon
// as its output gradient is there, runs F while its warm-up depth and its memory allow, and
// fills idle time with W; a W also runs whenever memory needs it before the next F. zb-auto
// and v-auto search over the policy below (schedule_search.h); one call is one candidate.
//
// Each rank decides when it is free, in global time order, using the exact times at which its
// inputs arrive (cost model and comm included). The lists it returns take exactly the times it
// planned when the simulator replays them (with admit_gap, a feasible timing the simulator
// can only improve on), and their peak activations (as PeakActivations counts them) never
// exceed the rank's limit.
#ifndef PIPECOORD_SCHEDULES_ZB_LIST_SCHEDULER_H_
#define PIPECOORD_SCHEDULES_ZB_LIST_SCHEDULER_H_

#include <vector>

#include "common/status.h"
#include "schedules/action.h"
#include "schedules/cost_model.h"

namespace pipecoord::schedules {

struct ListPolicy {
  // Per rank: how many micro-batches may have entered the rank (its first stage's F) and not
  // yet left it (its first stage's B): the warm-up depth. Values < 1 count as 1; missing: m.
  std::vector<int> max_in_flight;
  // A W goes into an idle gap of at least fill_ratio * w even when it delays the F or B that
  // ends the gap (1: only W's that fit; 0: any gap).
  double fill_ratio = 1.0;
  // Balances idle time across ranks (the published ZB-V scheduler's rule, Qi et al., ICLR
  // 2024): a W that does not fit a gap goes into it, delaying what ends the gap, only when the
  // gap is longer than the idle time the rank may still take on: the most idle time any rank
  // has had so far minus its own, or the allowance below if larger. A rank that has idled
  // less than the others keeps its W's for later; one that has idled most fills its gaps.
  // Replaces fill_ratio. Idle time counts from the rank's first action.
  bool balance_idle = false;
  // Per rank, optional (with balance_idle): the idle time the rank may take on, typically the
  // worst rank's idle time minus this rank's in an earlier run.
  std::vector<double> idle_allowance;
  // With both F and B ready, take the kind not run last (the 1F1B rhythm) rather than B first.
  bool alternate = false;
  // A rank with several stages (V, interleaved) admits a micro-batch only with room left for
  // its forwards on the rank's later stages too, and those of the micro-batches already in:
  // then no forward ever waits for memory that only a later micro-batch could free, and the
  // lists always finish. Without it the memory goes further, but a run can get stuck (an
  // error the search skips). No effect with one stage per rank.
  bool reserve = true;
  // Which of several ready forwards (backwards) runs first: the later stage, nearer the loss
  // (the default), or the earlier one. No effect with one stage per rank.
  bool later_forward_first = true;
  bool later_backward_first = true;
  // Per rank: the least time between two micro-batches entering the rank (0: none). Spacing
  // the warm-up's forwards at the steady state's pace, where memory cannot cover the wait for
  // the first backward anyway, keeps the micro-batches from travelling in waves.
  std::vector<double> admit_gap;
  // Optional, per rank: an order to follow (a valid schedule's lists). Each rank runs its F's
  // and B's in the guide's order (a B may go ahead of the F's before it when `jump_backward`),
  // and the W's where the rules above put them: the guide's order timed by the cost model.
  const std::vector<std::vector<Action>>* guide = nullptr;
  bool jump_backward = true;
  // The guide's next F may also go ahead of earlier B's, when memory allows: it fills the
  // wait for them (the lists may then get stuck: an error the caller skips).
  bool jump_forward = false;
  // Before its first B, a rank may also let micro-batches in ahead of the guide's order, as
  // memory allows: the warm-up uses the memory the steady state will need anyway.
  bool fill_warmup = false;
};

struct ListSchedule {
  std::vector<std::vector<Action>> ranks;  // compute actions (F, B, W)
  double makespan = 0;                     // what Simulate reports for these lists
  double span = 0;  // longest rank span (first start to last end on one rank), as Simulate's
  // Per rank: the most micro-batches that were in it at once (see max_in_flight).
  std::vector<int> in_flight;
  // Per rank: idle time between its first action and its last.
  std::vector<double> idle;
};

// `costs` resolved for a schedule placed by `stage_to_rank`; `rank_limits` one activation
// limit per rank, each at least the activations one micro-batch leaves on that rank's stages
// (else INVALID_ARGUMENT). FAILED_PRECONDITION when the lists get stuck (only without
// `reserve`, on ranks with several stages); INTERNAL would be a bug.
Result<ListSchedule> RunListScheduler(const StageCosts& costs, const std::vector<int>& stage_to_rank,
                                      int microbatches, const std::vector<double>& rank_limits,
                                      const ListPolicy& policy);

// The flat placement (stage r on rank r) with one limit for every rank.
Result<ListSchedule> RunListScheduler(const StageCosts& costs, int pp, int microbatches,
                                      double mem_limit, const ListPolicy& policy);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_ZB_LIST_SCHEDULER_H_
