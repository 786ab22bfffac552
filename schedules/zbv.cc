// ZB-V (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 6): two chunks per
// rank in a V, the backward split into B and W. Rank r first fills the way down with forwards
// (more the closer it is to the top of the V), then runs each chunk-1 micro-batch's F, B, W as
// soon as the turn sends it back, then alternates F B W on chunk 0 and on chunk 1 (the steady
// state), and in the cool-down runs the B's first, since they carry the gradient back to rank
// 0, filling its waits with the W's it deferred.
//
// With f = b = w, no communication and m >= 2p, every rank is busy from its first action to
// its last (span m(f+b+w)), rank r starting r f/2 after rank 0, and (w_share = 0.5) every rank
// peaks at 2p chunk activations: p rank shares, the same as 1F1B's first rank. The pattern
// needs 2p-1 micro-batches to fill the V; with fewer, it runs on padded micro-batches and drops
// them, which stays valid but leaves bubbles (any m >= 1 and p >= 1 is scheduled).
//
// That order assumes f = b = w; with other costs (or comm) it is replayed with the real ones
// (cost_replay.h): the same F's and B's, the W's moved to where they fill idle time, never
// above the order's own peak on any rank. In the Zero Bubble paper's setting (p = 8, m = 24,
// f = 18522, b = 18086, w = 9337, comm = 601, w_share = 0.3664) that takes the longest rank
// span from 1,189,271 to 1,186,022.5 (v_schedules_test.cc).
#include <algorithm>

#include "schedules/cost_replay.h"
#include "schedules/generator.h"
#include "schedules/v_rank_list.h"

namespace pipecoord::schedules {

Result<Schedule> GenerateZbv(const ScheduleSpec& spec) {
  const int p = spec.pp;
  const int m = spec.microbatches;
  const int n = std::max(m, 2 * p - 1);  // micro-batches the pattern runs, padding included
  Schedule s = MakeSchedule("zbv", p, 2, m, VPlacement(p));
  for (int r = 0; r < p; ++r) {
    VRankList v(p, r);
    // Warm-up: forwards down the V, then chunk-1 forwards as the turn sends them back, then
    // the first chunk-1 backwards (rank 0 holds the loss, so they start right away there).
    for (int i = 0; i < 2 * (p - r) - 1; ++i) v.Forward(0);
    for (int i = 0; i < r; ++i) {
      v.Forward(1);
      v.Forward(0);
    }
    for (int i = 0; i < p - r; ++i) {
      v.Forward(1);
      v.FullBackward(1);
    }
    // Steady state: F B W on chunk 0, then on chunk 1, until every forward has run.
    while (v.Forwards(1) < v.Forwards(0) || v.Forwards(0) < n) {
      if (v.Forwards(0) < n) v.Forward(0);
      v.FullBackward(0);
      v.Forward(1);
      v.FullBackward(1);
    }
    // Cool-down: the remaining B's first, the deferred W's in the gaps and at the end.
    for (int i = 0; i < r; ++i) {
      v.Backward(0);
      v.Backward(1);
    }
    for (int i = 0; i < p - r; ++i) {
      v.Backward(0);
      v.Weight(0);
    }
    while (v.Owed(1) > 0) v.Weight(1);
    while (v.Owed(0) > 0) v.Weight(0);
    s.ranks[r] = std::move(v).Take(m);
  }
  return BestReplay(s, spec.costs, RankPeaks(s, spec.costs));
}

}  // namespace pipecoord::schedules
