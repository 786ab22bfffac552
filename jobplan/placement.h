// Placement: which free worker takes which global rank of a job. Tensor-parallel ranks exchange
// the most data (every block's F and B wait for their all-reduces), so each tensor-parallel group
// goes to workers of one host when some host has that many free; a restart keeps each rank's
// previous worker where it can. Pure: hosts and worker ids in, an order out.
#ifndef PIPECOORD_JOBPLAN_PLACEMENT_H_
#define PIPECOORD_JOBPLAN_PLACEMENT_H_

#include <string>
#include <vector>

#include "common/rank_layout.h"
#include "common/status.h"

namespace pipecoord::jobplan {

struct FreeWorker {
  std::string id;
  std::string host;  // where it runs (WorkerInfo.host); workers of one host share its fast links
};

struct Placement {
  std::vector<int> worker_of_rank;  // index into the free workers, by global rank
  // Tensor-parallel groups whose ranks landed on more than one host, as
  // "ranks 4-5 (rank 0 (dp 2)): hosts a, b"; empty when every group is on one host (or tp = 1).
  std::vector<std::string> split_groups;
  // One line for the job's events: "tp groups on one host each" / "2 of 4 tp groups span hosts".
  std::string Summary(const RankLayout& layout) const;
};

// FAILED_PRECONDITION when fewer workers are free than the layout has ranks. `previous`: each
// rank's worker in the attempt before (by global rank; may be shorter or empty), kept where it is
// free and its group can stay on one host with it. With tp > 1 groups go to the hosts with the
// most free workers first (so large hosts keep room for the next group), and a group that fits
// nowhere whole takes the remaining workers in host order and is listed in split_groups; with
// tp 1 the other ranks take the free workers in the order given. Linear in the workers (plus
// hosts x groups with tp > 1).
Result<Placement> PlaceRanks(const RankLayout& layout, const std::vector<FreeWorker>& free,
                             const std::vector<std::string>& previous = {});

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_PLACEMENT_H_
