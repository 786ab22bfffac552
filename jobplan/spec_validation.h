// Checks every field of a submitted JobSpec before anything is stored or planned.
#ifndef PIPECOORD_JOBPLAN_SPEC_VALIDATION_H_
#define PIPECOORD_JOBPLAN_SPEC_VALIDATION_H_

#include "common/status.h"
#include "proto/job.pb.h"
#include "schedules/best_schedule.h"
#include "schedules/partition.h"

namespace pipecoord::jobplan {

// schedule "auto": the coordinator chooses the strategy for the free workers (jobplan/auto_plan.h).
inline constexpr char kAutoSchedule[] = "auto";
inline bool IsAuto(const v1::JobSpec& spec) { return spec.schedule() == kAutoSchedule; }
// schedule "best": the registered schedule with the shortest predicted step within spec.memLimit
// (schedules/best_schedule.h); WithDefaults puts the winner in its place (ResolveBestSchedule).
inline bool IsBest(const v1::JobSpec& spec) { return spec.schedule() == schedules::kBestSchedule; }

// INVALID_ARGUMENT naming the field as the user wrote it (protobuf's JSON name under "spec.",
// e.g. spec.learningRate, spec.stageLayers[1]) with the rule and the value, e.g.
// "spec.model.heads: must divide spec.model.hidden (64), got 5"; numbers in %g. Every limit
// checked here is in docs/usage.md's JobSpec field table. Fills nothing in. With schedule
// "auto", pp, vpp, dp, microbatches and microBatchSize may be 0 (chosen) and globalBatch is
// required; what is fixed is still checked, and must be able to make up globalBatch.
Status ValidateJobSpec(const v1::JobSpec& spec);

// model.ffnHidden, or its default when 0: 8h/3 rounded up to a multiple of 64 (proto/job.proto;
// the same as model::ModelConfig::FfnHidden for every integer h).
int FfnHiddenOf(const v1::ModelSpec& model);

// schedules::PartitionLayers' fields as a JobSpec names them.
inline const schedules::PartitionFields kSpecPartitionFields{"spec.stageLayers", "spec.model.layers", "spec.pp"};

// The spec with defaults applied (dp 0 -> 1, device "" -> "cpu", ffn_hidden 0 -> the SwiGLU
// default, data_seed 0 -> model.seed, unset costs -> 1/1/1/0). Call after ValidateJobSpec.
// Under schedule "auto" dp and vpp stay 0: they are the coordinator's to choose. Schedule "best"
// is resolved here (its winner and that schedule's vpp), so the spec the coordinator stores and
// shows names the schedule that runs; when no schedule fits, "best" stays and PlanJob says why.
// With `best` given, a resolved "best" also leaves its ranking there (the winner and the
// runners-up, what it refused), for the coordinator to store beside the job; else it is cleared.
v1::JobSpec WithDefaults(const v1::JobSpec& spec, v1::BestScheduleReport* best = nullptr);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_SPEC_VALIDATION_H_
