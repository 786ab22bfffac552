// 1F1B (PipeDream-flush, Narayanan et al. 2021): rank r runs p-r-1 warm-up forwards, then one
// forward and one backward in turn, so it never holds more than p-r micro-batches.
#include "schedules/one_f_one_b.h"

#include <algorithm>

#include "schedules/generator.h"

namespace pipecoord::schedules {

std::vector<Action> OneFOneBOrder(int stage, int microbatches, int warmup) {
  warmup = std::min(warmup, microbatches);
  std::vector<Action> list;
  list.reserve(2 * microbatches);
  int next_f = 0, next_b = 0;
  while (next_f < warmup) list.push_back({Op::kF, stage, next_f++});
  while (next_f < microbatches) {
    list.push_back({Op::kF, stage, next_f++});
    list.push_back({Op::kBW, stage, next_b++});
  }
  while (next_b < microbatches) list.push_back({Op::kBW, stage, next_b++});
  return list;
}

Result<Schedule> GenerateOneFOneB(const ScheduleSpec& spec) {
  Schedule s = MakeSchedule("1f1b", spec.pp, 1, spec.microbatches, LoopedPlacement(spec.pp, 1));
  for (int r = 0; r < spec.pp; ++r) s.ranks[r] = OneFOneBOrder(r, spec.microbatches, spec.pp - r - 1);
  return s;
}

}  // namespace pipecoord::schedules
