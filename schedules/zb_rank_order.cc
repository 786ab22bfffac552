#include "schedules/zb_rank_order.h"

#include <algorithm>
#include <string>

namespace pipecoord::schedules {

std::vector<Action> ZeroBubbleRankOrder(int stage, int microbatches, int warmup, int w_lag) {
  const int m = microbatches;
  warmup = std::clamp(warmup, 1, std::max(1, m));
  w_lag = std::clamp(w_lag, 0, m);
  std::vector<Action> list;
  list.reserve(3 * static_cast<size_t>(m));
  int next_f = 0, next_w = 0;
  while (next_f < warmup && next_f < m) list.push_back({Op::kF, stage, next_f++});
  for (int k = 0; k < m; ++k) {
    list.push_back({Op::kB, stage, k});
    if (k - w_lag >= 0) list.push_back({Op::kW, stage, next_w++});
    if (next_f < m) list.push_back({Op::kF, stage, next_f++});
  }
  while (next_w < m) list.push_back({Op::kW, stage, next_w++});
  return list;
}

Status CheckZeroBubbleShape(const ScheduleSpec& spec, const char* schedule_name) {
  const std::string name(schedule_name);
  if (spec.pp < 1) return InvalidArgument("pp: must be >= 1, got " + std::to_string(spec.pp));
  if (spec.microbatches < 1) {
    return InvalidArgument("microbatches: must be >= 1, got " + std::to_string(spec.microbatches));
  }
  if (spec.vpp != 1) {
    return InvalidArgument("vpp: schedule " + name + " places exactly 1 chunk(s) per rank, got " +
                           std::to_string(spec.vpp));
  }
  return Status::Ok();
}

}  // namespace pipecoord::schedules
