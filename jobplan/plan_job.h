// Plans a validated job: schedule, layer placement, per-rank job lists and predicted bubbles.
#ifndef PIPECOORD_JOBPLAN_PLAN_JOB_H_
#define PIPECOORD_JOBPLAN_PLAN_JOB_H_

#include "common/status.h"
#include "proto/job.pb.h"

namespace pipecoord::jobplan {

// `spec` must have passed ValidateJobSpec and WithDefaults. Each rank's list is one step:
// the schedule's actions with communication, then OPT (the optimizer step after gradient
// accumulation). Errors from the schedule engine come back as INVALID_ARGUMENT.
Result<v1::Plan> PlanJob(const v1::JobSpec& spec);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_PLAN_JOB_H_
