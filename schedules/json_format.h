// JSON export of a simulated schedule: the contract scripts and the dashboard read.
//
//   {"schedule": "1f1b", "pp": 2, "vpp": 1, "microbatches": 3,
//    "stage_to_rank": [0, 1],
//    "stage_layers": [4, 4],                       (only when the caller passes layer counts)
//    "makespan": 9, "bubble_rate": 0.1666..., "rank_span_bubble_rate": 0.1666...,
//    "peak_activations": [2, 1],                   (per rank)
//    "best": {"measure": "makespan", ...},         (only for schedule best: best_schedule.h)
//    "ranks": [{"rank": 0, "busy": 6, "idle": [[2, 3], [4, 5], [8, 9]],
//               "jobs": [{"op": "F", "stage": 0, "mb": 0, "start": 0, "end": 1},
//                        {"op": "SEND_F", "stage": 0, "mb": 0, "start": 1, "end": 1, "peer": 1},
//                        ...]}, ...]}
//
// "op" is one of F, B (input-gradient backward), W, BW (full backward), SEND_F, RECV_F, SEND_B,
// RECV_B, PROBE, OPT, and for an imported PyTorch schedule OVERLAP_F_B (the start of the slot
// the next two jobs share), UNSHARD, RESHARD, REDUCE_GRAD (mb -1); "peer" appears on the four
// communication ops only. Times are in cost
// units (see cost_model.h); peak activations in units of one micro-batch of a rank's whole
// share. Numbers are printed in their shortest round-trip form; the text is deterministic.
#ifndef PIPECOORD_SCHEDULES_JSON_FORMAT_H_
#define PIPECOORD_SCHEDULES_JSON_FORMAT_H_

#include <string>
#include <string_view>
#include <vector>

#include "schedules/schedule.h"
#include "schedules/simulator.h"

namespace pipecoord::schedules {

// The document above, ending in a newline. `sim` must come from Simulate(schedule, ...).
// `stage_layers` (blocks per virtual stage), when not empty, is written as "stage_layers";
// `best_json` (BestRankingToJson: how schedule best chose this one), when not empty, as "best".
std::string ScheduleToJson(const Schedule& schedule, const Simulation& sim,
                           const std::vector<int>& stage_layers = {}, std::string_view best_json = {});

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_JSON_FORMAT_H_
