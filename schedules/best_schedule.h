// Schedule "best": every registered schedule that accepts the job's shape, the memory-aware
// searches zb-auto and v-auto among them, built and simulated with one cost model; the one with
// the shortest predicted step within the memory limit on every rank runs.
//
// "Shortest" is the simulator's makespan (the step as the plan predicts it: first action to the
// last rank's end), then the longest rank span (the Zero Bubble paper's measure, which the
// searches minimise first), then the lower peak activations, then the simpler schedule (the
// registry's order: 1F1B before ZB-H1 before the searches). Values are compared to 9
// significant digits, so two orders that differ only by rounding tie.
//
// Each schedule runs at its own vpp (the registry's default) unless spec.vpp is given; then the
// schedules that place another number of chunks are refused. The csv importer is not a
// candidate (it needs a file).
#ifndef PIPECOORD_SCHEDULES_BEST_SCHEDULE_H_
#define PIPECOORD_SCHEDULES_BEST_SCHEDULE_H_

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "schedules/generator.h"
#include "schedules/schedule.h"
#include "schedules/simulator.h"

namespace pipecoord::schedules {

// The name a caller passes instead of a registered schedule.
inline constexpr char kBestSchedule[] = "best";

// Blocks per virtual stage for a schedule's placement (stage -> rank), or an error that refuses
// that schedule (e.g. fewer layers than stages). Lets each caller place the model its own way
// (pipectl's --layers/--stage-layers, a JobSpec's model.layers/stageLayers) and name its errors.
using LayerPlacer = std::function<Result<std::vector<int>>(const std::vector<int>& stage_to_rank)>;

struct BestSpec {
  // pp, microbatches, costs (no stage_fraction: the layers give it), vpp (0: each schedule's
  // own), mem_limit: peak activations allowed per rank, in micro-batches of one rank's share
  // (0: no limit beyond each schedule's own; the searches then use their default).
  ScheduleSpec spec;
  LayerPlacer place_layers;  // empty: every chunk costs 1/vpp of its rank's share
};

// One schedule that ran within the limit.
struct BestCandidate {
  std::string schedule;
  int vpp = 0;
  double makespan = 0;
  double rank_span = 0;         // longest rank span (first start to last end on one rank)
  double bubble_rate = 0;       // 1 - busy / (p x makespan)
  double peak_activations = 0;  // the largest over ranks
  int peak_rank = 0;
};

// One schedule that did not: its generator or the layer placement refused the shape, or its
// peak exceeds the limit.
struct BestRefusal {
  std::string schedule;
  std::string reason;
};

struct BestResult {
  Schedule schedule;                   // the winner with communication, validated
  Simulation simulation;               // of `schedule` with `costs`
  CostModel costs;                     // spec.costs with the winner's stage fractions
  std::vector<int> stage_layers;       // blocks per virtual stage of the winner; empty without a placer
  std::vector<BestCandidate> ranked;   // shortest first; ranked[0] is the winner; empty: none fits
  std::vector<BestRefusal> refused;    // in the registry's order
};

// The measure, for messages and reports.
inline constexpr char kBestMeasure[] = "makespan";

// INVALID_ARGUMENT for a bad shape or cost model (the registry's messages: "pp: must be >= 1,
// got 0"). When no schedule fits, `ranked` is empty, `schedule` too, and `refused` says why for
// each: the caller words the error in its own terms (BestFailure).
Result<BestResult> ChooseBestSchedule(const BestSpec& spec);

// "no schedule runs this shape within the memory limit 4: fthenb: peak activations 8 on rank
// 0, above the memory limit 4; ...", each reason passed through `word` (e.g. to name a JobSpec's
// field instead of pipectl's flag).
std::string BestFailure(const BestResult& result, double mem_limit,
                        const std::function<std::string(const std::string&)>& word = {});

// The ranking as JSON, one object: {"measure": "makespan", "mem_limit": 0, "winner": "zbv",
// "ranked": [{"schedule", "vpp", "makespan", "rank_span", "bubble_rate", "peak_activations",
// "peak_rank"}, ...], "refused": [{"schedule", "reason"}, ...]}.
std::string BestRankingToJson(const BestResult& result, double mem_limit);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_BEST_SCHEDULE_H_
