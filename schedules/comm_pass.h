// The communication pass: adds SEND/RECV actions to a compute-only schedule.
#ifndef PIPECOORD_SCHEDULES_COMM_PASS_H_
#define PIPECOORD_SCHEDULES_COMM_PASS_H_

#include "common/status.h"
#include "schedules/cost_model.h"
#include "schedules/schedule.h"

namespace pipecoord::schedules {

// Each result needed on another rank gets a SEND right after its producer and a RECV on the
// consumer's rank, posted as early as it can be without breaking blocking send/recv: all
// transfers are ordered by the time the cost model says their producer ends (ties by rank and
// position), and every rank meets its transfers in that one global order, so the result runs
// even if every send blocks until its receive is posted. The cost model only shapes the order;
// the result is valid for any real timing. An OVERLAP_F_B slot is one unit: the receives its two
// halves need come before it and their sends after it (as PyTorch's _add_send_recv places them).
// UNSHARD, RESHARD and REDUCE_GRAD stay where they are. Fails if `compute_only` already
// communicates or cannot finish.
Result<Schedule> AddCommunication(const Schedule& compute_only, const CostModel& costs);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_COMM_PASS_H_
