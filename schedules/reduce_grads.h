// Data parallel, stage by stage: each stage's gradient all-reduce as its own REDUCE_GRAD right
// after the stage's last weight gradient (W or BW) on its rank, instead of one all-reduce of the
// rank's every gradient after the step. A stage's gradients are final once its last W ran, so
// its reduction can run in the background while the rank finishes the other stages' cool-down
// (the simulator models that overlap; the CPU workers run it, worker/daemon/executor.h).
// PyTorch's pipelining lowers data-parallel schedules the same way (_add_reduce_grad in
// torch/distributed/pipelining/schedules.py).
#ifndef PIPECOORD_SCHEDULES_REDUCE_GRADS_H_
#define PIPECOORD_SCHEDULES_REDUCE_GRADS_H_

#include "schedules/schedule.h"

namespace pipecoord::schedules {

// Inserts one REDUCE_GRAD per stage right after the stage's last W or BW on its rank. On a
// compute order (BuildSchedule's case) the communication pass then keeps the W's sends right
// after it, before the REDUCE_GRAD; on a schedule with communication it goes before them. A schedule that has any
// REDUCE_GRAD already (an imported CSV's) is returned unchanged. A stage with no weight
// gradient on its rank (not a valid schedule) gets none.
Schedule AddReduceGrads(Schedule schedule);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_REDUCE_GRADS_H_
