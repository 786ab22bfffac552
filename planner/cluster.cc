#include "planner/cluster.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace pipecoord::planner {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Status Positive(const char* field, double v) {
  if (!(std::isfinite(v) && v > 0)) return InvalidArgument(std::string(field) + ": must be > 0, got " + Num(v));
  return Status::Ok();
}

}  // namespace

Status ValidateCluster(const ClusterSpec& c) {
  if (c.gpus < 1 || c.gpus > (1 << 20)) {
    return InvalidArgument("gpus: must be in [1, 1048576], got " + std::to_string(c.gpus));
  }
  if (c.gpus_per_node < 1) return InvalidArgument("gpus-per-node: must be >= 1");
  if (c.gpu_memory_bytes <= 0) return InvalidArgument("gpu-memory: must be > 0");
  if (c.reserved_bytes < 0 || c.reserved_bytes >= c.gpu_memory_bytes) {
    return InvalidArgument("reserve: must be >= 0 and below the GPU memory");
  }
  PIPECOORD_RETURN_IF_ERROR(Positive("intra-node-bandwidth", c.intra_node_bandwidth));
  PIPECOORD_RETURN_IF_ERROR(Positive("inter-node-bandwidth", c.inter_node_bandwidth));
  PIPECOORD_RETURN_IF_ERROR(Positive("peak-flops", c.peak_flops));
  PIPECOORD_RETURN_IF_ERROR(Positive("memory-bandwidth", c.memory_bandwidth));
  if (!(std::isfinite(c.link_latency_s) && c.link_latency_s >= 0)) {
    return InvalidArgument("link-latency: must be >= 0, got " + Num(c.link_latency_s));
  }
  if (!(c.efficiency > 0 && c.efficiency <= 1)) {
    return InvalidArgument("efficiency: must be in (0, 1], got " + Num(c.efficiency));
  }
  return Status::Ok();
}

}  // namespace pipecoord::planner
