// The memory-aware schedule search behind zb-auto (flat placement, vpp = 1) and v-auto (V
// placement, two chunks per rank), after the Zero Bubble paper's automatic scheduling (Qi et
// al., ICLR 2024, section 3) and the controllable-memory V schedules (Qi et al. 2024, "Pipeline
// Parallelism with Controllable Memory"): the shortest schedule with a split backward it finds
// whose peak activations stay within a per-rank limit on every rank. "Shortest" is the longest
// rank span, then the makespan (cost_replay.h), both simulated with spec.costs (per-stage
// F/B/W costs from stage_fraction and rank_slowdown, comm, w_share).
//
// Candidates, each kept only if its peak activations (PeakActivations) fit on every rank:
//   1. the handcrafted schedules of the placement, as their generators build them: zbh1 and
//      zbh2 (flat), zbv, v-half, v-min and dualpipev (V); so the search is never slower than
//      any of them at a limit it fits in (zbh1 and zbv are the reported baselines);
//   2. those orders replayed under the limit (cost_replay.h: the same F's and B's, the W's
//      where the costs say), which adapts them to memory they were not written for;
//   3. (flat) more orders of the handcrafted kind (zb_rank_order.h), with the warm-up and the
//      W delay chosen to fill the limit;
//   4. the list scheduler (zb_list_scheduler.h) over a grid of warm-up depths (flat: from the
//      time each rank waits for its first input gradient, scaled; 1F1B's; ZB-H2's; memory
//      only) and policies (W filling, the 1F1B rhythm; V: which chunk goes first, room held
//      for the way back, the pace at which rank 0 lets micro-batches in), then a local search
//      that moves one rank's warm-up depth, or the pace, at a time while the step shortens.
// Between 1F1B's memory and ZB-H2's the extra memory goes into deeper warm-ups and later W's,
// which shorten the step; below 1F1B's the warm-ups get shallower and the pace slower, which
// trades time for memory smoothly down to one micro-batch in flight.
//
// The work is bounded (about 5e6 actions list-scheduled or timed, but at least 8 candidates;
// 600 list-scheduler runs at most), so large pipelines get fewer candidates rather than a long
// wait. Ties keep the earlier candidate.
#ifndef PIPECOORD_SCHEDULES_MEMORY_SEARCH_H_
#define PIPECOORD_SCHEDULES_MEMORY_SEARCH_H_

#include <string>

#include "common/status.h"
#include "schedules/generator.h"
#include "schedules/schedule.h"

namespace pipecoord::schedules {

struct SearchResult {
  Schedule schedule;          // compute actions only, as a generator returns them
  double mem_limit = 0;       // the limit searched under (spec.mem_limit, or the default)
  double span = 0;            // longest rank span, simulated with spec.costs
  double makespan = 0;        // simulated with spec.costs
  std::string baseline;       // "zbh1" (flat) or "zbv" (V)
  double baseline_span = -1;  // its longest rank span, or -1 when it does not fit the limit
  std::string winner;         // which candidate: "zbh1", "zb-order ...", "list ...", ...
  int candidates = 0;         // schedules timed
};

// The limit used when spec.mem_limit is 0: 1F1B's peak, the max over ranks r of (p - r) times
// rank r's activations per micro-batch (p with even stages; ZB-V's peak on the V).
double DefaultMemLimit(const ScheduleSpec& spec, bool v_placement);

// vpp 0 counts as the placement's own (1 flat, 2 V). INVALID_ARGUMENT for a bad shape (pp,
// microbatches, another vpp), a bad cost model, or a limit below one micro-batch's activations
// on some rank (the least any schedule holds; the message names --mem-limit and that minimum).
// When the baseline fits and already reaches the least longest-rank span and the least makespan
// any schedule of the shape can have (each rank's work; each rank's work after its first input
// can arrive), nothing can be shorter and it is returned without searching (winner = baseline,
// 1 candidate); `shortcut` false searches anyway (tests compare the two). With
// spec.least_makespan_suffices the baseline is returned so when it reaches the least makespan,
// its span unpriced, and the search ends at the first candidate that reaches it (the planner's
// profiles: with few micro-batches v-auto finds that bound, the way back's, after a few).
Result<SearchResult> SearchZbAuto(const ScheduleSpec& spec, bool shortcut = true);
Result<SearchResult> SearchVAuto(const ScheduleSpec& spec, bool shortcut = true);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_MEMORY_SEARCH_H_
