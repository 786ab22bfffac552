// How much more work a virtual stage does than its transformer blocks: the last stage also runs
// the final norm, the LM head and the loss. The plan's costs split a rank's work by its blocks
// (schedules::CostModel::stage_fraction) and so price the head at nothing; the straggler check,
// which compares ranks per cost unit, would take the head's rank for a slow one (measured on
// README's byte-level demo, vocabulary 256, hidden 64, one block per stage: the head's rank
// 1.35-2x slower per cost unit than its peers on a clean run).
#ifndef PIPECOORD_JOBPLAN_STAGE_WORK_H_
#define PIPECOORD_JOBPLAN_STAGE_WORK_H_

#include <vector>

#include "proto/job.pb.h"

namespace pipecoord::jobplan {

// One factor per virtual stage of `plan`: (its blocks' forward FLOPs + the head's, if it has
// it) / its blocks' forward FLOPs, per token. A block: 2 (4 h^2 + 3 h ffn) for the linear
// layers and 4 s h for the attention core (no causal discount, as planner/step_time.h counts
// them); the head: 2 h vocab. 1 for a stage without the head or without blocks (a stage without
// blocks has no cost in the plan to correct). `spec` has its defaults (WithDefaults).
std::vector<double> StageWorkFactors(const v1::JobSpec& spec, const v1::Plan& plan);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_STAGE_WORK_H_
