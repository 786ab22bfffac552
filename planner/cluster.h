// ClusterSpec: the machines a plan is for.
#ifndef PIPECOORD_PLANNER_CLUSTER_H_
#define PIPECOORD_PLANNER_CLUSTER_H_

#include <cstdint>

#include "common/status.h"

namespace pipecoord::planner {

struct ClusterSpec {
  int gpus = 0;                 // every plan uses all of them: dp x tp x pp = gpus
  int64_t gpu_memory_bytes = 0;
  int64_t reserved_bytes = 0;   // per GPU, not for training (CUDA context, NCCL, fragmentation)
  int gpus_per_node = 8;
  double intra_node_bandwidth = 200e9;  // bytes/s one GPU moves in a collective inside a node
  double inter_node_bandwidth = 25e9;   // bytes/s one GPU moves across nodes (200 Gb/s NIC)
  double link_latency_s = 10e-6;        // per point-to-point transfer or collective step
  double peak_flops = 989e12;           // per GPU, dense 16-bit (H100 SXM)
  double efficiency = 0.5;              // share of peak_flops the matmuls reach
  double memory_bandwidth = 3e12;       // bytes/s, for the optimizer step
};

// gpus >= 1, memory > reserved, bandwidths and FLOP/s > 0, efficiency in (0, 1]. Errors name
// the field.
Status ValidateCluster(const ClusterSpec& cluster);

}  // namespace pipecoord::planner

#endif  // PIPECOORD_PLANNER_CLUSTER_H_
