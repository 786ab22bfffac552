// Step time of one strategy: compute from FLOPs, tensor-parallel collectives, pipeline
// point-to-point transfers and bubble, the data-parallel gradient exchange once per step, and
// the optimizer update.
#ifndef PIPECOORD_PLANNER_STEP_TIME_H_
#define PIPECOORD_PLANNER_STEP_TIME_H_

#include <cstdint>

#include "memory/model_spec.h"
#include "memory/training_spec.h"
#include "planner/cluster.h"

namespace pipecoord::planner {

// Forward FLOPs of one block and one micro-batch on one tensor-parallel rank: the linear
// layers (2 x tokens x in x out each) and the attention core (QK^T and softmax x V, 2 x 2 x
// s^2 x b x h, no causal discount).
struct BlockFlops {
  double linear = 0;
  double core = 0;
};
BlockFlops ForwardBlockFlops(const memory::ModelSpec& model, int micro_batch, int tp);
// The LM head's forward FLOPs, 2 x s x b x h x v / t.
double ForwardHeadFlops(const memory::ModelSpec& model, int micro_batch, int tp);

// Everything a strategy's time depends on besides the model and the cluster.
struct StrategyShape {
  int dp = 1, tp = 1, pp = 1, vpp = 1;
  bool sp = false;
  int zero = 0;
  memory::Recompute recompute = memory::Recompute::kNone;
  int micro_batch = 1, microbatches = 1;
  memory::DtypePolicy dtype = memory::DtypePolicy::kBf16;
  // The busiest rank (the most RankPipelineSeconds): its blocks, and whether it runs the LM head.
  int bottleneck_layers = 1;
  bool bottleneck_has_head = false;
  int64_t params_per_rank = 0;  // the largest rank's share (for the DP exchange and optimizer)
  double bubble_rate = 0;     // of the schedule, from the simulator under unit costs
};

struct StepTime {
  double compute_s = 0;    // m x (F + B + W) on the busiest rank, recompute included
  double tp_comm_s = 0;    // m x the tensor-parallel all-reduces (or gathers/scatters with SP)
  double bubble_s = 0;     // idle time the schedule leaves: (compute + tp) x rate / (1 - rate)
  double pp_comm_s = 0;    // point-to-point transfers on the critical path
  double dp_comm_s = 0;    // gradient reduction and parameter gathering, once per step (ZeRO-3:
                           // the parameter gathers run for every micro-batch)
  double optimizer_s = 0;  // reading and writing the optimizer's bytes
  double total_s = 0;
  double model_flops = 0;  // useful FLOPs of the step over all GPUs (no recompute), for MFU
};

// compute_s + tp_comm_s of a rank with `layers` blocks (and the LM head when `head`) in `shape`:
// what makes a rank the busiest (StrategyShape::bottleneck_layers, bottleneck_has_head).
double RankPipelineSeconds(const memory::ModelSpec& model, const ClusterSpec& cluster, const StrategyShape& shape,
                           int layers, bool head);

// Ring collectives: an all-reduce moves 2 (n-1)/n of the bytes per GPU, a reduce-scatter or
// all-gather (n-1)/n. A group runs over NVLink when it fits in a node (tp always; dp when
// tp x dp <= gpus per node; pp neighbours when tp x dp < gpus per node), else over the network.
StepTime EstimateStepTime(const memory::ModelSpec& model, const ClusterSpec& cluster,
                          const StrategyShape& shape);

}  // namespace pipecoord::planner

#endif  // PIPECOORD_PLANNER_STEP_TIME_H_
