// Closed-form bubble prediction for fthenb, 1f1b and interleaved: where each rank idles, from
// the schedule's formulas rather than a simulation (the simulator gives every schedule's idle
// windows; these formulas are what the coordinator and docs quote and the tests cross-check).
//
// Assumes equal stages, no communication cost, m >= p; t_f and t_b are one chunk's forward and
// full backward (B + W) times: f/v and (b+w)/v.
#ifndef PIPECOORD_SCHEDULES_BUBBLE_PREDICTION_H_
#define PIPECOORD_SCHEDULES_BUBBLE_PREDICTION_H_

#include <string_view>
#include <vector>

#include "common/status.h"
#include "schedules/simulator.h"

namespace pipecoord::schedules {

struct PredictedBubbles {
  double makespan = 0;
  // Per rank, idle windows whose position the closed form fixes, in time order.
  std::vector<std::vector<Interval>> windows;
  // Per rank, idle time the closed form counts but does not place (interleaved's middle
  // windows, whose positions depend on the micro-batch grouping). 0 for fthenb and 1f1b.
  std::vector<double> unplaced;
};

// fthenb:  rank r idles r t_f before its forwards, (p-r-1)(t_f+t_b) between its forwards and
//          backwards, r t_b at the end; makespan (m+p-1)(t_f+t_b).
// 1f1b:    r t_f before warm-up; (p-r-1) t_b waiting for the first backward; p-r-1 gaps of t_f
//          between the cool-down's backwards; r t_b at the end; makespan (m+p-1)(t_f+t_b).
// interleaved (m % p == 0): r t_f before warm-up and r t_b at the end, placed; (p-r-1)(t_f+t_b)
//          in between, unplaced; makespan m(t_f+t_b)v + (p-1)(t_f+t_b).
// Other schedules, m < p, or interleaved with m % p != 0: FAILED_PRECONDITION (use Simulate).
Result<PredictedBubbles> PredictBubbles(std::string_view schedule, int pp, int vpp,
                                        int microbatches, double f, double b, double w);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_BUBBLE_PREDICTION_H_
