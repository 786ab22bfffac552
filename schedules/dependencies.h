// The data dependencies between compute actions: the one place the pipeline's rules live.
//
//   F(s, m)    needs F(s-1, m)                      (activations from the previous stage)
//   B(s, m)    needs F(s, m) and B|BW(s+1, m)       (its own forward, the next stage's grad)
//   BW(s, m)   the same as B
//   W(s, m)    needs B(s, m)                        (the input-gradient pass saved its inputs)
//
// A "slot" names a result: kFwd (F done), kGrad (input gradient done: B or BW) and kWeight
// (weight gradient done: W or BW). Slots are indexed slot * stages * mbs + stage * mbs + mb.
#ifndef PIPECOORD_SCHEDULES_DEPENDENCIES_H_
#define PIPECOORD_SCHEDULES_DEPENDENCIES_H_

#include "schedules/action.h"

namespace pipecoord::schedules {

enum Slot { kFwd = 0, kGrad = 1, kWeight = 2 };
inline constexpr int kNumSlots = 3;

struct SlotRef {
  Slot slot;
  int stage;
};

// The producers of compute action `a` (same micro-batch); returns how many (0..2).
inline int Producers(const Action& a, int num_stages, SlotRef out[2]) {
  int n = 0;
  switch (a.op) {
    case Op::kF:
      if (a.stage > 0) out[n++] = {kFwd, a.stage - 1};
      break;
    case Op::kB:
    case Op::kBW:
      out[n++] = {kFwd, a.stage};
      if (a.stage + 1 < num_stages) out[n++] = {kGrad, a.stage + 1};
      break;
    case Op::kW:
      out[n++] = {kGrad, a.stage};
      break;
    default:
      break;
  }
  return n;
}

// The slots compute action `a` fills; returns how many (0..2).
inline int Fills(const Action& a, Slot out[2]) {
  switch (a.op) {
    case Op::kF: out[0] = kFwd; return 1;
    case Op::kB: out[0] = kGrad; return 1;
    case Op::kW: out[0] = kWeight; return 1;
    case Op::kBW: out[0] = kGrad; out[1] = kWeight; return 2;
    default: return 0;
  }
}

// The stage that consumes what compute action `a` sends to another stage, or -1 when it sends
// nothing (W, or F of the last stage, or B of the first stage).
inline int SendTarget(const Action& a, int num_stages) {
  if (a.op == Op::kF) return a.stage + 1 < num_stages ? a.stage + 1 : -1;
  if (a.op == Op::kB || a.op == Op::kBW) return a.stage > 0 ? a.stage - 1 : -1;
  return -1;
}

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_DEPENDENCIES_H_
