// The one converter between a schedule (schedules::Schedule, PROBE and OPT included as actions)
// and the wire's per-rank job lists (v1::Plan). Both enums list the ops in the same order; the
// proto's 0 is OP_UNSPECIFIED.
#ifndef PIPECOORD_JOBPLAN_PLAN_CONVERT_H_
#define PIPECOORD_JOBPLAN_PLAN_CONVERT_H_

#include "common/status.h"
#include "proto/job.pb.h"
#include "schedules/schedule.h"

namespace pipecoord::jobplan {

v1::Action ToProto(const schedules::Action& action);
// An OP_UNSPECIFIED action (never written by ToProto) reads as F.
schedules::Action FromProto(const v1::Action& action);

// Replaces plan->stage_to_rank and plan->ranks with `schedule`'s.
void ScheduleToPlan(const schedules::Schedule& schedule, v1::Plan* plan);

// The plan's job lists as a schedule named and shaped by `spec`, every action kept.
schedules::Schedule PlanToSchedule(const v1::JobSpec& spec, const v1::Plan& plan);

// What a worker's executor runs: F, B, W, BW, SEND/RECV, PROBE and OPT. PyTorch's OVERLAP_F_B,
// UNSHARD, RESHARD and REDUCE_GRAD (an imported CSV's) are carried by ToProto and FromProto
// like any op, but no plan may hold them: INVALID_ARGUMENT naming the first one's rank,
// position and op (PlanJob refuses the job with it).
Status CheckWorkersRun(const schedules::Schedule& schedule);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_PLAN_CONVERT_H_
