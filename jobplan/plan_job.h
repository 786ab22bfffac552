// Plans a validated job: schedule, layer placement, per-rank job lists and predicted bubbles.
#ifndef PIPECOORD_JOBPLAN_PLAN_JOB_H_
#define PIPECOORD_JOBPLAN_PLAN_JOB_H_

#include "common/status.h"
#include "proto/job.pb.h"

namespace pipecoord::jobplan {

// `spec` must have passed ValidateJobSpec and WithDefaults. Each rank's list is one step:
// the schedule's actions with communication, then OPT (the optimizer step after gradient
// accumulation). Errors from the schedule engine come back as INVALID_ARGUMENT.
// Schedule "best" (WithDefaults has usually resolved it already) is resolved first.
Result<v1::Plan> PlanJob(const v1::JobSpec& spec);

// Schedule "best" for a validated spec (costs set): every registered schedule that accepts
// spec.pp, spec.vpp (0: each schedule's own), spec.microbatches and the layers (model.layers,
// stageLayers), built with the spec's costs as PlanJob would plan it, the shortest predicted
// makespan within spec.memLimit (0: each schedule's own memory) wins
// (schedules::ChooseBestSchedule). Returns the spec with schedule and vpp set to the winner's.
// FAILED_PRECONDITION naming spec.schedule when none fits, with every schedule's reason.
// `report` (optional) gets the ranking: the winner first, then the runners-up, and the refusals.
Result<v1::JobSpec> ResolveBestSchedule(const v1::JobSpec& spec, v1::BestScheduleReport* report = nullptr);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_PLAN_JOB_H_
