// FThenB (GPipe, Huang et al. 2019): every forward, then every backward.
#include "schedules/generator.h"

namespace pipecoord::schedules {

Result<Schedule> GenerateFThenB(const ScheduleSpec& spec) {
  Schedule s = MakeSchedule("fthenb", spec.pp, 1, spec.microbatches, LoopedPlacement(spec.pp, 1));
  for (int r = 0; r < spec.pp; ++r) {
    auto& list = s.ranks[r];
    for (int mb = 0; mb < spec.microbatches; ++mb) list.push_back({Op::kF, r, mb});
    // Backwards in the forwards' order: micro-batch 0's gradient reaches the first rank first.
    for (int mb = 0; mb < spec.microbatches; ++mb) list.push_back({Op::kBW, r, mb});
  }
  return s;
}

}  // namespace pipecoord::schedules
