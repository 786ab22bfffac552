// Eager 1F1B: one more warm-up forward per rank than 1F1B, so the next forward's activations
// are already on their way while the rank runs a backward (send/recv overlap), at the price of
// one more micro-batch of activations per rank. As PaddlePaddle's Eager1F1B pass.
#include "schedules/generator.h"
#include "schedules/one_f_one_b.h"

namespace pipecoord::schedules {

Result<Schedule> GenerateEagerOneFOneB(const ScheduleSpec& spec) {
  Schedule s = MakeSchedule("eager-1f1b", spec.pp, 1, spec.microbatches, LoopedPlacement(spec.pp, 1));
  for (int r = 0; r < spec.pp; ++r) s.ranks[r] = OneFOneBOrder(r, spec.microbatches, spec.pp - r);
  return s;
}

}  // namespace pipecoord::schedules
