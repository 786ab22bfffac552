// 1F1B order of one rank, shared by 1f1b and eager-1f1b.
#ifndef PIPECOORD_SCHEDULES_ONE_F_ONE_B_H_
#define PIPECOORD_SCHEDULES_ONE_F_ONE_B_H_

#include <vector>

#include "schedules/action.h"

namespace pipecoord::schedules {

// `warmup` forwards, then alternate one forward and one backward (BW) until the forwards run
// out, then the remaining backwards. Micro-batches in order 0..m-1 for both.
std::vector<Action> OneFOneBOrder(int stage, int microbatches, int warmup);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_ONE_F_ONE_B_H_
