// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 2.1): 1F1B with the
// backward split into B (input gradient) and W (weight gradient). Rank r keeps 1F1B's warm-up
// (p - r forwards before its first B) and runs each W r micro-batches late, so every rank ends
// with r + 1 W's that fill the time the last input gradients take to run down the pipeline.
//
// Memory: rank r holds p - r + r * w_share micro-batches of activations. Rank 0 holds p, as in
// 1F1B, and no rank holds more: the peak of the pipeline is 1F1B's. (Rank r > 0 holds more than
// 1F1B's p - r unless w_share = 0: the late W's keep their share alive. That is the price of
// the shorter step; with a per-rank cap of p - r no schedule can do better than
// m t + (p - 1)(f + b).)
//
// Time, with comm = 0, m >= p, t = f + b + w: the step takes
//   m t + (p - 1)(max(b, min(f, w)) + max(0, f - w)),
// which is m t + (p - 1)(f + b - w) whenever w <= f and w <= b (the paper's setting, f = b = w
// included), against 1F1B's m t + (p - 1) t. With m < p every rank warms up with all m
// forwards and the same order follows.
#include "schedules/generator.h"
#include "schedules/zb_rank_order.h"

namespace pipecoord::schedules {

Result<Schedule> GenerateZbh1(const ScheduleSpec& spec) {
  PIPECOORD_RETURN_IF_ERROR(CheckZeroBubbleShape(spec, "zbh1"));
  const int p = spec.pp;
  Schedule s = MakeSchedule("zbh1", p, 1, spec.microbatches, LoopedPlacement(p, 1));
  for (int r = 0; r < p; ++r) s.ranks[r] = ZeroBubbleRankOrder(r, spec.microbatches, p - r, r);
  return s;
}

}  // namespace pipecoord::schedules
