// ProgramSet as JSON, the file format of `pipectl memory --program FILE`:
//
//   {"programs": [{"name": "forward",
//                  "ops": [{"name": "fc1",
//                           "inputs": [{"id": "x", "shape": [2048, 4, 4096], "dtype": "bf16"},
//                                      {"id": "w_fc1", "shape": [4096, 4096], "persistable": true}],
//                           "outputs": [{"id": "y", "shape": [2048, 4, 4096]}]},
//                          {"name": "relu_", "inputs": ["y"],
//                           "outputs": [{"id": "y2", "inplace": true}]}]}],
//    "keep": ["y2"]}
//
// A tensor's shape and dtype (default "bf16") are given where it first appears; later
// references may repeat them (they must agree) or be just the id, as an object or a bare
// string. An in-place output may omit its shape (it takes its source's).
#ifndef PIPECOORD_MEMORY_PROGRAM_JSON_H_
#define PIPECOORD_MEMORY_PROGRAM_JSON_H_

#include <string>
#include <string_view>

#include "common/status.h"
#include "memory/program.h"

namespace pipecoord::memory {

// Never crashes on malformed input; errors name the place and the field:
// "programs[0].ops[3].outputs[1].shape: expected an array of non-negative integers".
// Limits: 1,000,000 ops and 16 dimensions per tensor.
Result<ProgramSet> ParseProgramJson(std::string_view text);

// The document above (each reference with the fields it has), ending in a newline.
std::string ProgramSetToJson(const ProgramSet& set);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_PROGRAM_JSON_H_
