// Program: ops in execution order with the tensors each reads and writes, the input of the
// op-level liveness simulator (liveness.h). A ProgramSet runs several programs back to back
// (one block's forward, its input-gradient backward B, its weight-gradient backward W), so a
// tensor one program makes and a later one reads stays alive in between.
#ifndef PIPECOORD_MEMORY_PROGRAM_H_
#define PIPECOORD_MEMORY_PROGRAM_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pipecoord::memory {

struct TensorRef {
  std::string id;               // names one tensor across every program of the set
  std::vector<int64_t> shape;   // elements per dimension ([] is a scalar)
  bool shape_given = false;     // false: as declared where the tensor first appears
  std::string dtype = "bf16";   // fp32, bf16, fp16, fp8, int64, int32, u8, bool
  bool persistable = false;     // weights, optimizer and gradient buffers: never freed
  // Outputs only: the op writes into the storage of `inplace_of` (default: its first input)
  // instead of allocating.
  bool inplace = false;
  std::string inplace_of;
};

struct ProgramOp {
  std::string name;
  std::vector<TensorRef> inputs;
  std::vector<TensorRef> outputs;
};

struct Program {
  std::string name;  // "forward", "backward_input", "backward_weight", ...
  std::vector<ProgramOp> ops;
};

struct ProgramSet {
  std::vector<Program> programs;  // run in this order
  std::vector<std::string> keep;  // tensors handed on after the last program (never freed)
};

// Bytes of one element of `dtype`, or 0 when the name is unknown.
int64_t DtypeBytes(std::string_view dtype);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_PROGRAM_H_
