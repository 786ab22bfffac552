#include "planner/search_space.h"

#include "schedules/registry.h"

namespace pipecoord::planner {

Status ValidateSearchSpace(const SearchSpace& s) {
  if (s.global_batch < 1) return InvalidArgument("global-batch: must be >= 1, got " + std::to_string(s.global_batch));
  if (s.micro_batches.empty()) return InvalidArgument("micro-batches: must list at least one size");
  for (int b : s.micro_batches) {
    if (b < 1 || b > 1 << 16) return InvalidArgument("micro-batches: each must be in [1, 65536], got " + std::to_string(b));
  }
  if (s.zero_stages.empty()) return InvalidArgument("zero: must list at least one stage");
  for (int z : s.zero_stages) {
    if (z < 0 || z > 3) return InvalidArgument("zero: stages are 0..3, got " + std::to_string(z));
  }
  if (s.recompute.empty()) return InvalidArgument("recompute: must list at least one policy");
  for (int v : s.vpps) {
    if (v < 2 || v > 64) return InvalidArgument("vpps: each must be in [2, 64], got " + std::to_string(v));
  }
  if (s.max_tp < 1) return InvalidArgument("max-tp: must be >= 1");
  if (s.pp < 0) return InvalidArgument("pp: must be >= 0 (0: any), got " + std::to_string(s.pp));
  if (s.dp < 0) return InvalidArgument("dp: must be >= 0 (0: any), got " + std::to_string(s.dp));
  if (s.microbatches < 0) {
    return InvalidArgument("microbatches: must be >= 0 (0: any), got " + std::to_string(s.microbatches));
  }
  for (const std::string& name : s.schedules) {
    auto info = schedules::FindSchedule(name);
    if (!info.ok()) return InvalidArgument(info.status().message());
    if (name == "csv") return InvalidArgument("schedules: csv imports a schedule file and cannot be searched");
  }
  return Status::Ok();
}

}  // namespace pipecoord::planner
