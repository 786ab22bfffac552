// A PlanResult for people (tables) and for programs (JSON).
//
// JSON: {"model", "gpus", "gpu_memory_bytes", "reserved_bytes", "global_batch", "seq_len",
//        "candidates", "feasible", "schedule_profiles", "schedule_cache_hits",
//        "top": [{"rank", "schedule", "dp", "tp", "sp", "pp", "vpp", "micro_batch",
//                 "microbatches", "zero", "recompute",
//                 "memory": {"peak_bytes", "tightest_rank", "params_bytes", "grads_bytes",
//                            "optimizer_bytes", "activations_bytes", "transient_bytes"},
//                 "time": {"step_s", "compute_s", "tp_comm_s", "bubble_s", "bubble_rate",
//                          "pp_comm_s", "dp_comm_s", "optimizer_s"},
//                 "tokens_per_s", "mfu"}],
//        "pruned": [{"reason", "count", "example"}]}
#ifndef PIPECOORD_PLANNER_PLAN_REPORT_H_
#define PIPECOORD_PLANNER_PLAN_REPORT_H_

#include <string>

#include "memory/model_spec.h"
#include "planner/planner.h"

namespace pipecoord::planner {

std::string PlanText(const memory::ModelSpec& model, const ClusterSpec& cluster, const SearchSpace& space,
                     const PlanResult& result);
std::string PlanJson(const memory::ModelSpec& model, const ClusterSpec& cluster, const SearchSpace& space,
                     const PlanResult& result);  // ends in a newline

}  // namespace pipecoord::planner

#endif  // PIPECOORD_PLANNER_PLAN_REPORT_H_
