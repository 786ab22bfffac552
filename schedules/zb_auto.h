// zb-auto: the shortest zero-bubble schedule (vpp = 1, split backward) this search finds under
// a per-rank activation limit, after the Zero Bubble paper's automatic scheduling (Qi et al.,
// ICLR 2024, section 3). GenerateZbAuto returns SearchZbAuto's schedule; the rest of the result
// says how it was found, for tests and benchmarks.
//
// Candidates, each timed by the simulator with spec.costs (comm included) and kept only if its
// peak activations (PeakActivations, spec.costs.w_share) stay within the limit on every rank:
//   1. zbh1 and zbh2 themselves, when they fit: zb-auto is never slower than zbh1 (nor zbh2)
//      at a limit it fits in;
//   2. more orders of the same handcrafted kind (zb_rank_order.h), with the warm-up and the W
//      delay chosen to fill the limit;
//   3. the list scheduler (zb_list_scheduler.h) over a grid of warm-up depths (from the time
//      each rank waits for its first input gradient, scaled; 1F1B's; ZB-H2's; memory only) and
//      W-filling policies, then a local search that moves one rank's warm-up depth at a time
//      while that shortens the step.
// The work is bounded (about 5e6 actions timed or list-scheduled, but at least 8 candidates;
// 600 list-scheduler runs at most), so large pipelines get fewer candidates rather
// than a long wait. The shortest makespan wins; ties (within 1e-9 relative) keep the earlier
// candidate.
#ifndef PIPECOORD_SCHEDULES_ZB_AUTO_H_
#define PIPECOORD_SCHEDULES_ZB_AUTO_H_

#include <string>

#include "common/status.h"
#include "schedules/generator.h"
#include "schedules/schedule.h"

namespace pipecoord::schedules {

struct ZbAutoResult {
  Schedule schedule;          // compute actions only, as a generator returns them
  double mem_limit = 0;       // the limit searched under (spec.mem_limit, or the default)
  double makespan = 0;        // simulated with spec.costs
  double zbh1_makespan = -1;  // zbh1 with spec.costs, or -1 when zbh1 does not fit the limit
  std::string winner;         // which candidate: "zbh1", "zb-order ...", "list ..."
  int candidates = 0;         // schedules timed
};

// The limit used when spec.mem_limit is 0: 1F1B's peak, max over ranks of (p - r) times the
// rank's activation per micro-batch (pp with even stages).
double ZbAutoDefaultMemLimit(const ScheduleSpec& spec);

// vpp 0 counts as 1. INVALID_ARGUMENT for a bad shape (pp, microbatches, vpp other than 1),
// a bad cost model, or a limit below one micro-batch's activations on some rank (the least any
// schedule needs; the message names --mem-limit and that minimum).
Result<ZbAutoResult> SearchZbAuto(const ScheduleSpec& spec);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_ZB_AUTO_H_
