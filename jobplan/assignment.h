// What the coordinator hands one worker of a planned job.
#ifndef PIPECOORD_JOBPLAN_ASSIGNMENT_H_
#define PIPECOORD_JOBPLAN_ASSIGNMENT_H_

#include <string>
#include <vector>

#include "common/rank_layout.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace pipecoord::jobplan {

// The assignment of global rank `global` of a job (jobplan/layout.h): its pipeline rank's job
// list and stages (every tensor-parallel shard of a stage runs the same list), its coordinates,
// every member's data endpoint (by global rank) and the session.
v1::Assignment BuildAssignment(const std::string& job_id, const v1::JobSpec& spec, const v1::Plan& plan,
                               int global, const std::vector<std::string>& endpoints, uint64_t session);

// `recovery` as rank `global` of `layout` gets it: its peers only the ranks it exchanges data with
// (RankLayout::DataPlanePeers) and itself.
v1::Recovery RecoveryFor(const v1::Recovery& recovery, const RankLayout& layout, int global);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_ASSIGNMENT_H_
