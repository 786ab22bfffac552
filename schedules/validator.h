// Validator: the one check every schedule passes before use, generated or imported.
#ifndef PIPECOORD_SCHEDULES_VALIDATOR_H_
#define PIPECOORD_SCHEDULES_VALIDATOR_H_

#include "common/status.h"
#include "schedules/schedule.h"

namespace pipecoord::schedules {

// Shape only: pp, vpp, micro-batches, placement and every action's stage, micro-batch and peer
// in range (UNSHARD, RESHARD and REDUCE_GRAD with mb -1), and every OVERLAP_F_B followed by its
// F and then a B or BW. Cheap; the simulator calls it so that bad input never indexes out of
// bounds.
Status CheckShape(const Schedule& schedule);

// Everything: the shape; every (stage, micro-batch) has exactly one F and either one BW or one
// B and one W, on the rank that owns the stage; on a rank, F(s) before B(s) before W(s) and a
// same-rank producer before its consumer; communication, when present, is complete (one SEND
// after each producer whose consumer is on another rank, one RECV before that consumer, peers
// right); and the schedule finishes: with communication, under blocking (rendezvous) send/recv;
// without, under data dependencies alone. PyTorch's newer actions, when present: an
// OVERLAP_F_B's backward half does not need its forward half; REDUCE_GRAD once per stage, on
// its rank, after the stage's last W (or BW), and on every stage if on any, and an OPT after
// the REDUCE_GRAD of every stage its rank holds; for a stage with
// UNSHARD/RESHARD, the two alternate starting with UNSHARD, each of the stage's compute actions
// runs between an UNSHARD and its RESHARD, a RESHARD follows some compute, and the stage ends
// resharded. Errors are INVALID_ARGUMENT and name the rank, the position and the rule.
Status Validate(const Schedule& schedule);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_VALIDATOR_H_
