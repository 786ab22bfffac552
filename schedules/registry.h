// The schedules pipecoord knows, by name, and the one way to build a runnable schedule.
#ifndef PIPECOORD_SCHEDULES_REGISTRY_H_
#define PIPECOORD_SCHEDULES_REGISTRY_H_

#include <string_view>
#include <vector>

#include "common/status.h"
#include "schedules/generator.h"

namespace pipecoord::schedules {

struct ScheduleInfo {
  const char* name;      // "1f1b", "zbv", ...
  const char* summary;   // one line for --help and `pipectl schedules`
  Generator generate;
  int default_vpp;       // chunks per rank when the user gives none
  int required_vpp;      // 0: any vpp >= 1; otherwise the only one allowed (V shapes: 2)
  bool split_backward;   // emits B and W rather than BW
  bool v_placement = false;  // two chunks per rank in a V (VPlacement); otherwise looped
};

const std::vector<ScheduleInfo>& AllSchedules();

// NOT_FOUND lists the known names.
Result<const ScheduleInfo*> FindSchedule(std::string_view name);

// Checks the spec's common fields, resolves vpp, and runs the named generator: compute only.
Result<Schedule> GenerateComputeOrder(std::string_view name, ScheduleSpec spec);

// Where each virtual stage runs (stage -> rank) for the named schedule, without generating it:
// the placement depends only on the schedule's shape (an imported CSV is read for its own).
// So a caller can place layers, derive the stages' costs and generate once with them.
Result<std::vector<int>> PlaceStages(std::string_view name, const ScheduleSpec& spec);

// GenerateComputeOrder, then (spec.reduce_grads) AddReduceGrads, then the communication pass,
// then the validator: what a worker runs.
Result<Schedule> BuildSchedule(std::string_view name, const ScheduleSpec& spec);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_REGISTRY_H_
