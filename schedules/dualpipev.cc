// DualPipeV (DeepSeek's DualPipe repository, dualpipev.py): DualPipe "cut in half" (Sea AI Lab).
// DualPipe feeds micro-batches from both ends of a pipeline that holds two copies of the model;
// cutting it in half folds the two directions into the two arms of a V, so each rank holds one
// copy split in two chunks (chunk 0 on the way down, chunk 1 on the way back) and micro-batches
// enter at rank 0 only. Rank r runs eight phases:
//   1. 2(p-r-1) forwards on chunk 0            5. p-r-1 x (B1+W1, F1, B0+W0)
//   2. r+1 x (F0, F1)                          6. r+1 x (B1, B0), the later half deferring W
//   3. p-r-1 x (B1, W1, F1)                    7. p-r-1 x (oldest deferred W, B0 deferring W)
//   4. m-2p+r+1 x (F0, B1+W1, F1, B0+W0)       8. the W's still deferred, oldest first
// DualPipe overlaps the forward of one chunk with the backward of the other (its F&B step, the
// point of the schedule: one's compute hides the other's all-to-all). Our IR has no fused F&B
// action, so each pair runs back to back, forward first, as DualPipe does when it cannot
// overlap. Elsewhere a backward without a deferred W runs its W right after its B.
//
// With f = b = w, no communication and w_share = 0.5, rank r's span is m(f+b+w) + (p-1-r) f/2
// (all ranks end together) and every rank peaks at 2p+1 chunk activations: DualPipeV's "PP+1"
// per device, PP counted in stages. That is ZB-V's step time with half a rank share more
// memory: what DualPipe gains, the F&B overlap, is outside this model.
#include <string>

#include "schedules/generator.h"
#include "schedules/v_rank_list.h"

namespace pipecoord::schedules {

Result<Schedule> GenerateDualPipeV(const ScheduleSpec& spec) {
  const int p = spec.pp;
  const int m = spec.microbatches;
  if (m < 2 * p) {  // as dualpipev.py asserts: its warm-up alone runs 2p forwards on rank 0
    return InvalidArgument("microbatches: dualpipev needs at least 2 x pp = " + std::to_string(2 * p) +
                           " micro-batches, got " + std::to_string(m));
  }
  Schedule s = MakeSchedule("dualpipev", p, 2, m, VPlacement(p));
  for (int r = 0; r < p; ++r) {
    VRankList v(p, r);
    const int down = p - r - 1;  // ranks below this one
    for (int i = 0; i < 2 * down; ++i) v.Forward(0);
    for (int i = 0; i < r + 1; ++i) {
      v.Forward(0);
      v.Forward(1);
    }
    for (int i = 0; i < down; ++i) {
      v.Backward(1);
      v.OldestWeight();
      v.Forward(1);
    }
    for (int i = 0; i < m - 2 * p + r + 1; ++i) {
      v.Forward(0);
      v.FullBackward(1);
      v.Forward(1);
      v.FullBackward(0);
    }
    for (int i = 0; i < down; ++i) {
      v.FullBackward(1);
      v.Forward(1);
      v.FullBackward(0);
    }
    // From the middle of phase 6 on, W's wait, to fill the cool-down's gaps. Odd ranks start
    // deferring one B earlier than even ranks, as in dualpipev.py.
    bool defer = false;
    auto backward = [&](int chunk) { defer ? v.Backward(chunk) : v.FullBackward(chunk); };
    for (int i = 0; i < r + 1; ++i) {
      if (i == (r + 1) / 2 && r % 2 == 1) defer = true;
      backward(1);
      if (i == (r + 1) / 2 && r % 2 == 0) defer = true;
      backward(0);
    }
    for (int i = 0; i < down; ++i) {
      v.OldestWeight();
      v.Backward(0);
    }
    while (v.Owed(0) + v.Owed(1) > 0) v.OldestWeight();
    s.ranks[r] = std::move(v).Take(m);
  }
  return s;
}

}  // namespace pipecoord::schedules
