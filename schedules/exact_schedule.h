// The exact reference for small pipelines: branch and bound over every compute order (flat or
// V placement, split backward) for the shortest longest-rank-span whose peak activations stay
// within a per-rank limit, with the same cost model, memory rule (PeakActivations) and timing
// (Simulate: each action as early as its rank and its inputs allow) as the heuristic searches
// (memory_search.h). It measures their gap; it is exponential, so only for about p <= 4, m <= 8
// (flat) and p <= 3, m <= 4 (V).
//
// The space: each rank's list of F's, B's and W's, every stage running each kind's micro-
// batches in order (as every generator and the published schedulers do). Each such set of
// lists is built exactly once, by placing actions in order of (start time, rank) and never
// going back in time. A partial schedule is cut when a lower bound on its longest rank span
// (each rank's elapsed span plus the work it has left, from no earlier than the time reached)
// is no shorter than the best complete one found so far (Land and Doig's branch and bound);
// complete schedules are compared span first, then makespan, like Shorter (cost_replay.h).
#ifndef PIPECOORD_SCHEDULES_EXACT_SCHEDULE_H_
#define PIPECOORD_SCHEDULES_EXACT_SCHEDULE_H_

#include <cstdint>

#include "common/status.h"
#include "schedules/generator.h"
#include "schedules/schedule.h"

namespace pipecoord::schedules {

struct ExactOptions {
  bool v_placement = false;  // two stages per rank in a V, else one per rank
  // Partial schedules to expand at most; past it the search stops with `proven` false.
  int64_t node_limit = 50'000'000;
  // Optional: a schedule of the same shape to start from (a heuristic's), the best so far
  // when it fits the limit; the search then only looks for shorter ones, which cuts far more.
  const Schedule* start = nullptr;
};

struct ExactResult {
  Schedule schedule;  // compute actions only; empty if nothing fits the limit
  double span = 0;    // longest rank span, as Simulate times it
  double makespan = 0;
  bool proven = false;  // the whole space was searched: no schedule is shorter
  bool from_start = false;  // nothing shorter than options.start was found: it is returned
  int64_t nodes = 0;    // partial schedules expanded
};

// spec.mem_limit 0 means DefaultMemLimit (memory_search.h). INVALID_ARGUMENT for a bad shape
// or cost model, or a limit below one micro-batch's activations on some rank.
Result<ExactResult> ExactShortestSchedule(const ScheduleSpec& spec, const ExactOptions& options = {});

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_EXACT_SCHEDULE_H_
