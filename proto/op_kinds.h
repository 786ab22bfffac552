// What kind of action a v1::Op is: the one place that says which ops are compute, for every
// user of the wire types (coordinator checks, worker executor, tests). schedules::IsCompute
// (schedules/action.h) says the same for the schedule IR's Op; op_kinds_test checks the two
// enums agree op by op.
#ifndef PIPECOORD_PROTO_OP_KINDS_H_
#define PIPECOORD_PROTO_OP_KINDS_H_

#include "proto/schedule.pb.h"

namespace pipecoord::v1 {

// F, B, W and BW: the actions that run the model's layers. Their time is a rank's busy time in
// every bubble figure; SEND/RECV, PROBE, OPT, OVERLAP_F_B (its two halves are), UNSHARD, RESHARD,
// REDUCE_GRAD (and OP_UNSPECIFIED) are not compute.
constexpr bool IsCompute(Op op) { return op == F || op == B || op == W || op == BW; }

}  // namespace pipecoord::v1

#endif  // PIPECOORD_PROTO_OP_KINDS_H_
