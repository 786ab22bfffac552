// A strict pre-check of a JSON document before protobuf reads it: protobuf's JSON parser lets
// the last of two equal keys win, so `{"learningRate": 0.1, ..., "learningRate": 5}` would run
// with 5 and nobody told. CheckJsonKeys walks the document once (no tree is built) and refuses a
// key repeated in one object, at any depth, and any text that is not JSON.
#ifndef PIPECOORD_CLI_JSON_KEYS_H_
#define PIPECOORD_CLI_JSON_KEYS_H_

#include <string>
#include <string_view>

#include "common/status.h"

namespace pipecoord::cli {

struct JsonKeyOptions {
  // The name of the whole document in messages; an object inside it is named by the path of
  // keys and indices to it, as written: "spec.model", "spec.stages[2]".
  std::string root = "spec";
  // Keys protobuf reads as one field are duplicates too: a field's proto name and its JSON name
  // ("learning_rate" and "learningRate").
  bool proto_field_names = true;
  // Objects and arrays nested deeper than this are refused (protobuf's own limit is 100).
  int max_depth = 100;
};

// OK, or INVALID_ARGUMENT with one of (lines count from 1, columns in bytes from 1):
//   duplicate key "learningRate" in spec (line 9, first on line 4)
//   duplicate key "learning_rate" in spec (line 9, the same field as "learningRate" on line 4)
//   not JSON: line 3, column 12: expected ',' or '}' after a member of spec.model, got 'x'
Status CheckJsonKeys(std::string_view json, const JsonKeyOptions& options = {});

}  // namespace pipecoord::cli

#endif  // PIPECOORD_CLI_JSON_KEYS_H_
