#include "memory/program.h"

namespace pipecoord::memory {

int64_t DtypeBytes(std::string_view d) {
  if (d == "fp32" || d == "int32") return 4;
  if (d == "bf16" || d == "fp16") return 2;
  if (d == "int64" || d == "fp64") return 8;
  if (d == "fp8" || d == "u8" || d == "bool" || d == "int8") return 1;
  return 0;
}

}  // namespace pipecoord::memory
