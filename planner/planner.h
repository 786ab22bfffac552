// The strategy search: every dp x tp x pp x vpp x schedule x micro-batch x ZeRO x recompute for
// a model on a cluster, pruned by rules and memory, ranked by estimated step time.
#ifndef PIPECOORD_PLANNER_PLANNER_H_
#define PIPECOORD_PLANNER_PLANNER_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/status.h"
#include "memory/model_spec.h"
#include "planner/cluster.h"
#include "planner/schedule_cache.h"
#include "planner/search_space.h"
#include "planner/step_time.h"

namespace pipecoord::planner {

// A plan with pp 1 has no pipeline and so no schedule: the search tries it once, not once per
// schedule name, under this name. Its memory and time are those of its one rank running the
// micro-batches one after another, forward then backward (kNoScheduleEngine at pp 1: one
// micro-batch's activations live).
inline constexpr char kNoSchedule[] = "none";
inline constexpr char kNoScheduleEngine[] = "1f1b";

struct Candidate {
  std::string schedule;  // kNoSchedule when shape.pp is 1
  StrategyShape shape;  // dp, tp, pp, vpp, sp, zero, recompute, micro-batch, micro-batches
  // Memory of the rank with the largest peak (bytes), as memory::EstimateMemory counts it.
  int tightest_rank = 0;
  int64_t peak_bytes = 0;
  int64_t params_bytes = 0, grads_bytes = 0, optimizer_bytes = 0;  // optimizer: master + moments
  int64_t activations_bytes = 0, transient_bytes = 0;
  StepTime time;
  double tokens_per_s = 0;
  double mfu = 0;  // model FLOPs / (gpus x peak FLOP/s x step time)
};

struct PrunedReason {
  std::string reason;   // the rule, e.g. "memory over budget"
  int64_t count = 0;    // candidates it removed
  std::string example;  // one of them, with the numbers
};

struct PlanResult {
  int64_t candidates = 0;  // the whole space
  int64_t feasible = 0;    // passed every rule and fit in memory
  std::vector<Candidate> top;         // fastest first
  std::vector<PrunedReason> pruned;   // most frequent first
  int64_t schedule_profiles = 0;      // schedules generated and simulated
  int64_t schedule_cache_hits = 0;
};

struct PlanOptions {
  int top_k = 10;
  bool cache_schedules = true;  // false: simulate the schedule for every candidate (baseline)
  // A cache kept by the caller across several searches (schedule auto plans every world size a
  // fleet allows: the same (schedule, pp, vpp, micro-batches) shapes recur); null: the search's
  // own. Not shared between concurrent searches (not thread-safe).
  ScheduleCache* shared_cache = nullptr;
  // Threads that build schedule profiles up front (with the cache on); 0: one per core.
  int threads = 0;
  // Branch and bound: the groups of candidates (everything but the ZeRO stage and the recompute
  // policy fixed) are evaluated fastest-possible first, the least step time any of them can
  // have (the least pipeline bubble of its shape, planner::MinBubbleRate) ascending, and a group
  // whose least time is above the top k's slowest is pruned without building its schedule (the
  // searching ones, zb-auto and v-auto, take up to seconds per shape). The top k is the same as
  // without the bound. false: every group is built and evaluated (the tests' reference).
  bool bound_by_step_time = true;
  // A step time the caller already holds k strategies at or under (schedule "auto": the world
  // sizes searched before this one): groups whose least time is above it are pruned as above,
  // before the search's own top k fills. Only with bound_by_step_time; infinity: none.
  double time_to_beat = std::numeric_limits<double>::infinity();
  // Called now and then with (candidates accounted for, total), and once at the end.
  std::function<void(int64_t done, int64_t total)> progress;
};

// Errors: invalid model, cluster or search space (INVALID_ARGUMENT naming the field); an
// unknown recipe (NOT_FOUND). A space with no feasible strategy is not an error: `top` is empty
// and `pruned` says why.
Result<PlanResult> Plan(const memory::ModelSpec& model, const ClusterSpec& cluster,
                        const SearchSpace& space, const PlanOptions& options = {});

}  // namespace pipecoord::planner

#endif  // PIPECOORD_PLANNER_PLANNER_H_
