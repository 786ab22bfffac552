// ZB-H2 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 2.2): rank r warms
// up with 2(p - r) - 1 forwards, enough to cover the time until its first input gradient comes
// back when f = b, and runs each W 2r micro-batches late, so the end of the step is a
// parallelogram rather than 1F1B's trapezoid: no rank idles between its first and last action.
//
// Memory: rank r holds 2(p - r) - 1 + 2r * w_share micro-batches of activations (2p - 1 on every
// rank when w_share = 1, 2p - 1 - r with the default 0.5), about twice 1F1B's.
//
// Time, with comm = 0, m >= 2p - 1, t = f + b + w: the longest per-rank span (first start to
// last end on one rank, the paper's measure) is
//   m t + (p - 1) max(0, b - f, f + b - 2w),
// which is m t + (p - 1) max(0, f + b - 2w) whenever b <= f or w <= f, and exactly m t (no
// bubble) when f = b = w. With m < 2p - 1 the warm-up is cut to m forwards; for f = b = w the
// longest span is then m t + (2p - 1 - m) f, the least rank 0 can wait for its first B.
#include "schedules/generator.h"
#include "schedules/zb_rank_order.h"

namespace pipecoord::schedules {

Result<Schedule> GenerateZbh2(const ScheduleSpec& spec) {
  PIPECOORD_RETURN_IF_ERROR(CheckZeroBubbleShape(spec, "zbh2"));
  const int p = spec.pp;
  Schedule s = MakeSchedule("zbh2", p, 1, spec.microbatches, LoopedPlacement(p, 1));
  for (int r = 0; r < p; ++r) {
    s.ranks[r] = ZeroBubbleRankOrder(r, spec.microbatches, 2 * (p - r) - 1, 2 * r);
  }
  return s;
}

}  // namespace pipecoord::schedules
