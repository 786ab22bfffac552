// The op-level liveness simulator: replays a ProgramSet and reports memory op by op.
//
// Rules. Persistable tensors (weights, gradient and optimizer buffers) are allocated before the
// first op and never freed. A tensor first seen as an input is an input of the whole set (the
// block's input from the previous layer, the gradient from the next one): alive from the
// start. An op allocates its outputs, except in-place ones, which share their source's
// storage. A storage is freed right after the last op, in any program of the set, that reads
// or writes it, so what a later program (backward, a later W) still needs stays alive; tensors
// in `keep` are never freed.
#ifndef PIPECOORD_MEMORY_LIVENESS_H_
#define PIPECOORD_MEMORY_LIVENESS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "memory/program.h"

namespace pipecoord::memory {

struct OpLiveness {
  int program = 0;           // index in ProgramSet::programs
  int op = 0;                // index in that program
  std::string name;          // "forward/fc1"
  int64_t before = 0;        // bytes live before the op runs
  int64_t during = 0;        // before + its new outputs: what the op needs at once
  int64_t after = 0;         // during - what dies with it
};

struct LivenessResult {
  std::vector<OpLiveness> ops;        // every op of every program, in execution order
  int64_t persistable_bytes = 0;      // live throughout
  int64_t input_bytes = 0;            // inputs of the whole set, live from the start
  int64_t peak_bytes = 0;             // the largest `during`
  int peak_op = -1;                   // index in `ops` of the op at the peak
  std::vector<int64_t> program_end;   // bytes live after each program's last op
};

// Errors name the place: "programs[1].ops[4].outputs[0]: tensor \"dx\" is produced twice";
// shapes or dtypes that disagree between references; an in-place source that is not an input
// of the op; a tensor read before the op that produces it; an unknown id in keep.
Result<LivenessResult> SimulateLiveness(const ProgramSet& set);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_LIVENESS_H_
