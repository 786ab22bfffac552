// Action: one step of one rank's job list. A schedule is plain data: per rank, a list of these.
//
// Text form (as PyTorch pipelining writes it): stage, op, micro-batch: "2F0", "1BW3",
// "0SEND_F1". Our op names differ from PyTorch's in one place: our B is the input-gradient
// backward (PyTorch "I") and our BW is the fused full backward (PyTorch "B"); csv_format.h
// translates.
#ifndef PIPECOORD_SCHEDULES_ACTION_H_
#define PIPECOORD_SCHEDULES_ACTION_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pipecoord::schedules {

enum class Op : uint8_t {
  kF,      // forward
  kB,      // backward for the input gradient only (zero-bubble split)
  kW,      // backward for the weight gradient only
  kBW,     // full backward: B and W fused
  kSendF,  // send this stage's forward output to stage + 1
  kRecvF,  // receive this stage's forward input from stage - 1
  kSendB,  // send this stage's input gradient to stage - 1
  kRecvB,  // receive this stage's output gradient from stage + 1
  kProbe,  // numerical probe inside a predicted bubble
  kOpt,    // optimizer step after the last micro-batch
  // PyTorch pipelining's newer actions (torch/distributed/pipelining/schedules.py), read from and
  // written to its CSV format; no generator of ours emits them and the workers do not run them.
  kOverlapFB,   // opens one slot: the next two actions of the rank, an F and then a B or BW (of
                // another stage or micro-batch), run together, as DualPipe overlaps a forward
                // with a backward (PyTorch's OVERLAP_F_B). Its stage and mb are the F's.
  kUnshard,     // FSDP: gather the stage's sharded parameters before its compute (no micro-batch)
  kReshard,     // FSDP: free the gathered parameters after the stage's compute (no micro-batch)
  kReduceGrad,  // reduce the stage's gradients across data-parallel replicas, once, after its
                // last W (no micro-batch)
};

inline constexpr int kNumOps = 14;

// "F", "B", "W", "BW", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "PROBE", "OPT", "OVERLAP_F_B",
// "UNSHARD", "RESHARD", "REDUCE_GRAD".
const char* OpName(Op op);
Result<Op> ParseOp(std::string_view name);

// F, B, W and BW: the actions that run the model's layers (an OVERLAP_F_B is not one: the two
// actions it opens are).
inline bool IsCompute(Op op) { return op <= Op::kBW; }
inline bool IsComm(Op op) { return op >= Op::kSendF && op <= Op::kRecvB; }
inline bool IsSend(Op op) { return op == Op::kSendF || op == Op::kSendB; }
// UNSHARD, RESHARD and REDUCE_GRAD: about a stage as a whole; their mb is -1.
inline bool IsPerStage(Op op) { return op >= Op::kUnshard && op <= Op::kReduceGrad; }
// Whether the action names a micro-batch: every op but OPT (which may, "0OPT" or "0OPT3") and
// the per-stage ones (which never do).
inline bool TakesMicroBatch(Op op) { return op != Op::kOpt && !IsPerStage(op); }

struct Action {
  Op op = Op::kF;
  int32_t stage = 0;  // virtual stage (model chunk) in model order
  int32_t mb = 0;     // micro-batch
  int32_t peer = -1;  // the other rank of a SEND/RECV, -1 otherwise

  friend bool operator==(const Action&, const Action&) = default;
};

// "2F0", "0SEND_F1", "1UNSHARD" (the peer is not part of the text form; a micro-batch below 0
// of an op that need not name one is left out).
std::string ToString(const Action& a);
// Parses the text form, e.g. "1BW3", "2REDUCE_GRAD". Errors name the text and what is wrong.
Result<Action> ParseAction(std::string_view text);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_ACTION_H_
