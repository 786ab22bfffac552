// Plans a validated job: schedule, layer placement, per-rank job lists and predicted bubbles.
#ifndef PIPECOORD_COORDINATOR_JOB_PLAN_H_
#define PIPECOORD_COORDINATOR_JOB_PLAN_H_

#include "common/status.h"
#include "proto/job.pb.h"

namespace pipecoord::coordinator {

// `spec` must have passed ValidateJobSpec and WithDefaults. Each rank's list is one step:
// the schedule's actions with communication, then OPT (the optimizer step after gradient
// accumulation). Errors from the schedule engine come back as INVALID_ARGUMENT.
Result<v1::Plan> PlanJob(const v1::JobSpec& spec);

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_JOB_PLAN_H_
