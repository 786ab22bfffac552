// Simulator: times any valid schedule against a cost model.
//
// Each rank runs its list in order; a compute action starts when the rank is free and its
// inputs are there. Communication is asynchronous: sends and receives are posted early, so a
// transfer between ranks adds `comm` after its producer ends and occupies neither rank.
// SEND/RECV/PROBE/OPT take no time here. UNSHARD and RESHARD hold their rank for the cost
// model's unshard/reshard (0 by default) and are not compute: their time is idle in the bubble
// figures. REDUCE_GRAD (a stage's data-parallel gradient all-reduce) is launched where it stands
// and runs in the background for the cost model's reduce_grad, one at a time per rank (the
// rank's reduction lane starts it at max(launch, the previous one's end)); the rank goes on with
// its list at once, an OPT waits until every reduction launched before it has ended, and the
// rank's step ends when both its list and its lane are done (the makespan covers the lane). So
// a stage reduced right after its last W overlaps the rest of the rank's cool-down, while
// reductions placed just before OPT (the all-reduce after the step) add their whole time.
// An OVERLAP_F_B and the F and B (or BW) after it are one slot:
// it starts when the rank is free and both halves' inputs are there, lasts
// CostModel::overlap's F + B - overlap x min(F, B), and both results are ready at its end; the
// two halves' timings split the slot in proportion to their costs (the OVERLAP_F_B itself gets
// an empty interval at the slot's start).
#ifndef PIPECOORD_SCHEDULES_SIMULATOR_H_
#define PIPECOORD_SCHEDULES_SIMULATOR_H_

#include <vector>

#include "common/status.h"
#include "schedules/cost_model.h"
#include "schedules/schedule.h"

namespace pipecoord::schedules {

struct Interval {
  double start = 0;
  double end = 0;
};

struct RankStats {
  double busy = 0;          // total compute time
  double first_start = 0;   // first compute action's start
  double last_end = 0;      // last compute action's end
  double peak_activations = 0;  // in units of one micro-batch of the rank's whole share
  std::vector<Interval> idle;   // gaps in [0, makespan] with no compute, in time order
};

struct Simulation {
  std::vector<std::vector<Interval>> timing;  // parallel to Schedule::ranks
  std::vector<RankStats> ranks;
  double makespan = 0;
  // 1 - sum(busy) / (ranks * makespan)
  double bubble_rate = 0;
  // 1 - sum(busy) / (ranks * longest rank span), the Zero Bubble paper's measure
  double rank_span_bubble_rate = 0;
};

// Fails with FAILED_PRECONDITION when the schedule cannot finish (an action waits for a result
// that is never produced, or a cycle); the message names each stuck rank and action.
Result<Simulation> Simulate(const Schedule& schedule, const CostModel& costs);

// Explicit timings: each action's duration by rank and list position, communication, PROBE and
// OPT included (a send that blocks its rank for a while occupies it here), and one transfer time
// added to every input that crosses ranks. For re-simulating a job's own lists with what a run
// measured (jobplan/calibration.h); any unit, the same for all.
struct ActionDurations {
  std::vector<std::vector<double>> duration;  // parallel to Schedule::ranks
  double comm = 0.0;
};

// As Simulate, with the durations given. INVALID_ARGUMENT when `durations` does not have one
// finite value >= 0 per action (naming the rank and position) or comm is not one.
// Peak activations count 1/v per F, as an unset CostModel. An OVERLAP_F_B slot lasts its own
// duration plus its two halves' (overlap 0).
Result<Simulation> SimulateDurations(const Schedule& schedule, const ActionDurations& durations);

// Peak live activations of each rank walking its list in order (no timing needed).
std::vector<double> PeakActivations(const Schedule& schedule, const StageCosts& costs);

// Whether `peak` activations are within `limit`: sums of fractional stage shares (a third of
// a rank's blocks, halves kept for W) land an ulp or so either side of the exact value, so a
// peak within 1e-9 of the limit, relatively, is within it (the searches, `best` and the CLI's
// note all ask this).
inline bool WithinMemLimit(double peak, double limit) { return peak <= limit * (1 + 1e-9); }

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_SIMULATOR_H_
