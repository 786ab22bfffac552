// Probe placement: one PROBE action per rank and step, inside the rank's longest predicted
// bubble, so the numerical probe runs while the rank would be idle anyway.
//
// Windows come from the closed forms of schedules/bubble_prediction.h for fthenb, 1f1b and
// interleaved (equal stages, no communication cost), and from the simulator's idle windows for
// every other schedule. A window ending at a compute action puts the probe just before that
// action (after the sends of the one before it); the trailing window puts it before OPT.
#ifndef PIPECOORD_JOBPLAN_PROBE_PLACEMENT_H_
#define PIPECOORD_JOBPLAN_PROBE_PLACEMENT_H_

#include <vector>

#include "common/status.h"
#include "proto/job.pb.h"
#include "schedules/simulator.h"

namespace pipecoord::jobplan {

struct ProbeWindow {
  int rank = 0;
  schedules::Interval window;  // cost units
  bool closed_form = false;    // from bubble_prediction.h rather than the simulator
  int position = -1;           // index in the rank's list where the PROBE goes; -1: none
};

// The window and position chosen for each rank (position -1 when the rank has no idle time).
Result<std::vector<ProbeWindow>> ChooseProbeWindows(const v1::JobSpec& spec, const v1::Plan& plan);

// Inserts the PROBE actions into plan->ranks (no-op when spec.health turns probes off).
Status PlaceProbes(const v1::JobSpec& spec, v1::Plan* plan);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_PROBE_PLACEMENT_H_
