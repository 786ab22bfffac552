// The rank order of the handcrafted zero-bubble schedules (Qi et al., "Zero Bubble Pipeline
// Parallelism", ICLR 2024, section 2), shared by zbh1, zbh2 and zb-auto's candidates.
//
// A rank runs `warmup` forwards, then for each micro-batch k in turn: B(k), then W(k - w_lag)
// (the weight gradient w_lag micro-batches behind, once there is one), then the next forward
// while any is left; at the end it runs the W's still owed. Holding back w_lag W's costs
// w_lag * w_share activations and leaves the rank work for the end of the step, when the
// input-gradient chain runs down the pipeline and would otherwise leave it idle.
//
//   ZB-H1: warmup p - r, w_lag r        (every rank holds p - r + r * w_share; rank 0 holds p)
//   ZB-H2: warmup 2(p - r) - 1, w_lag 2r (every rank holds 2p - 1 - 2r + 2r * w_share)
#ifndef PIPECOORD_SCHEDULES_ZB_RANK_ORDER_H_
#define PIPECOORD_SCHEDULES_ZB_RANK_ORDER_H_

#include <vector>

#include "common/status.h"
#include "schedules/action.h"
#include "schedules/generator.h"

namespace pipecoord::schedules {

// The order above for stage `stage` (vpp = 1); warmup is clamped to 1..microbatches and w_lag
// to 0..microbatches. A pipeline of these orders finishes whenever warm-up does not grow from
// one rank to the next (each rank has already sent every forward its successor waits for).
std::vector<Action> ZeroBubbleRankOrder(int stage, int microbatches, int warmup, int w_lag);

// The shape every zero-bubble generator here needs: pp >= 1, microbatches >= 1, vpp == 1.
// INVALID_ARGUMENT names the field and the rule (the registry checks this too; a direct call
// of a generator gets the same answer).
Status CheckZeroBubbleShape(const ScheduleSpec& spec, const char* schedule_name);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_ZB_RANK_ORDER_H_
