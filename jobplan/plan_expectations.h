// PlanExpectations: what the plan predicts for each rank's compute actions (start, end, cost in
// the plan's cost units), from simulating the plan's own job lists. The timing checks compare
// measured actions with these, position by position.
#ifndef PIPECOORD_JOBPLAN_PLAN_EXPECTATIONS_H_
#define PIPECOORD_JOBPLAN_PLAN_EXPECTATIONS_H_

#include <vector>

#include "common/status.h"
#include "proto/job.pb.h"
#include "schedules/schedule.h"
#include "schedules/simulator.h"

namespace pipecoord::jobplan {

struct ComputeSlot {
  int action_index = 0;  // position in the rank's job list (PROBE and OPT included)
  v1::Action action;
  double start = 0, end = 0;  // predicted, cost units, from the step's start
};

struct PlanExpectations {
  double makespan = 0;                          // cost units
  std::vector<std::vector<ComputeSlot>> ranks;  // per pipeline rank, compute actions in list order
  std::vector<std::vector<schedules::Interval>> idle;  // per rank, predicted idle windows
};

// The plan's ranks as a schedule (PROBE and OPT left out; `index` maps each kept action back to
// its position in the plan's list).
schedules::Schedule PlanSchedule(const v1::JobSpec& spec, const v1::Plan& plan,
                                 std::vector<std::vector<int>>* index);

// The cost model of a planned job: spec.costs with stage fractions from the layer placement.
schedules::CostModel PlanCosts(const v1::JobSpec& spec, const v1::Plan& plan);

// Simulates the plan; INVALID_ARGUMENT if the plan's lists cannot be simulated.
Result<PlanExpectations> ExpectPlan(const v1::JobSpec& spec, const v1::Plan& plan);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_PLAN_EXPECTATIONS_H_
