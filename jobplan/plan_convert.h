// The one converter between a schedule (schedules::Schedule, PROBE and OPT included as actions)
// and the wire's per-rank job lists (v1::Plan). Both enums list the ops in the same order; the
// proto's 0 is OP_UNSPECIFIED.
#ifndef PIPECOORD_JOBPLAN_PLAN_CONVERT_H_
#define PIPECOORD_JOBPLAN_PLAN_CONVERT_H_

#include <string_view>

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

// What a worker's executor runs on `device` ("cpu" or "", "cuda"): F, B, W, BW, SEND/RECV, PROBE,
// OPT, PyTorch's OVERLAP_F_B (an imported CSV's: its F and backward run one after the other, as
// PyTorch's runtime runs them without a custom overlap), and on the CPU REDUCE_GRAD (a stage's
// data-parallel gradient all-reduce, in the background until OPT). UNSHARD and RESHARD (FSDP's),
// and REDUCE_GRAD on cuda, are carried by ToProto and FromProto like any op, but no plan may hold
// them: INVALID_ARGUMENT naming the first one's rank, position and op (PlanJob refuses the job).
Status CheckWorkersRun(const schedules::Schedule& schedule, std::string_view device);

// Whether a job's plan gets one REDUCE_GRAD per stage after its last W (schedules/reduce_grads.h),
// reducing each stage's gradients on its own rather than all of them after the step: dp > 1 on
// CPU workers for a generated schedule. The CUDA backend keeps the one device all-reduce at OPT
// (its gradients are one device buffer for every stage the rank holds); an imported CSV runs as
// written: its own REDUCE_GRADs, or without any, the one all-reduce at OPT.
bool ReducesGradientsPerStage(const v1::JobSpec& spec);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_PLAN_CONVERT_H_
