// Schedule "auto": the strategy a job runs, chosen by the planner for the workers free now.
//
// The search covers what those workers can run today: dp, pp, vpp, tp (on CPU workers: the
// planner's divisors of the world that divide heads and ffn, up to the free workers of one host,
// priced with the planner's collective model) with and without sequence parallelism, ZeRO 0 or 1
// and activation recompute none, selective or full (CPU workers; ZeRO-2 is left out: under
// pipelining its peaks measured as ZeRO-1's while the planner's model would rate it leaner), the
// schedule and the micro-batch count and size (fp32 with AdamW: the pipecoord-cpu recipe), with
// dp x microbatches x microBatchSize = spec.globalBatch and whatever the spec fixed kept fixed
// (spec.tp 0, and zero and recompute left unset, leave them to the search). The job may use fewer
// workers than are free, since the global batch or the layers may not split over all of them, and
// the fastest predicted plan wins wherever it lands: WorldSizes says which sizes are tried. The planner ranks; each of the fastest is then
// planned as a job (PlanJob) and the first whose every rank's memory budget (what the
// coordinator checks the run against) fits the workers' smallest reported memory is chosen.
#ifndef PIPECOORD_JOBPLAN_AUTO_PLAN_H_
#define PIPECOORD_JOBPLAN_AUTO_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "planner/schedule_cache.h"
#include "proto/job.pb.h"

namespace pipecoord::jobplan {

// The world sizes schedule "auto" tries with `free_workers` free, ascending: every size up to
// kEveryWorldSizeUpTo free workers; above, the free count and every size of the form {1, 3, 5, 7}
// x 2^j below it (the sizes with many ways to split into dp x tp x pp; trying all 16,384 sizes
// of a large fleet, one planner search each, took minutes).
constexpr int kEveryWorldSizeUpTo = 64;
std::vector<int> WorldSizes(int free_workers);

// The workers a schedule "auto" job is planned for.
struct FreeWorkers {
  int count = 0;
  // The smallest device memory they reported; 0: none reported one, and memory is not checked.
  uint64_t memory_bytes = 0;
  std::string device_kind = "cpu";
  // Free workers on the host with the most of them: a tensor-parallel group stays on one host
  // (jobplan/placement.h), so tp goes no higher. 0: count (one host).
  int largest_host = 0;
};

struct AutoPlan {
  v1::JobSpec spec;  // as it will run: the strategy filled in, ValidateJobSpec and WithDefaults passed
  v1::Plan plan;     // PlanJob(spec)
  v1::AutoPlanReport report;
};

struct AutoPlanOptions {
  // Branch and bound across world sizes: they are searched the largest first, keeping the fastest
  // k of each, and a size's groups of strategies that cannot beat the fastest k found on the
  // sizes before it are pruned without building their schedules (planner::PlanOptions::
  // time_to_beat), first with k = 8, then 32. The fastest k are exactly the unbounded search's;
  // when the choice (the first that fits as a job, and the next best shown) would look past them,
  // the next depth runs, and past 32 every size is searched in full. So the choice is always the
  // unbounded search's. false: every world size searched in full (the tests' reference).
  bool bound_across_world_sizes = true;
  // The schedule shapes built so far, kept for the next search (the coordinator's, across
  // submissions: a dry run, then the job; planner/schedule_cache.h, thread-safe); null: this
  // search's own. Shapes depend on (schedule, pp, vpp, micro-batches) only, so the choice is the
  // same either way.
  planner::ScheduleCache* shapes = nullptr;
};

// `spec` has passed ValidateJobSpec and asks for schedule "auto". FAILED_PRECONDITION when no
// worker is free, when no strategy can run the job on them (the most frequent reasons), or when
// none fits their memory, naming the smallest shortfall ("rank 0 needs 9.10 GiB, workers report
// 8.00 GiB").
Result<AutoPlan> PlanAuto(const v1::JobSpec& spec, const FreeWorkers& workers, const AutoPlanOptions& options = {});

// "zbh1, pp 2, vpp 1, dp 1, 4 micro-batches of 2": a strategy as one line shows it.
std::string DescribeStrategy(const v1::StrategyChoice& choice);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_AUTO_PLAN_H_
