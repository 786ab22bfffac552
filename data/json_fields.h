// Typed fields of a parsed JSON object (memory/json.h's reader), for the formats of this package
// whose metadata is JSON: the flat token sidecar, the safetensors header and a sharded
// checkpoint's index. Each error names the file and the field: "d/train.json: vocab_size:
// expected an integer >= 1, got -3".
#ifndef PIPECOORD_DATA_JSON_FIELDS_H_
#define PIPECOORD_DATA_JSON_FIELDS_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "common/status.h"
#include "memory/json.h"

namespace pipecoord::data {

using memory::JsonValue;

// The text of `file` parsed as one JSON object: "FILE: not JSON: line 1, column 5: ...",
// "FILE: expected a JSON object, got array", "FILE: key \"a\" appears twice".
Result<JsonValue> ParseJsonObject(std::string_view text, std::string_view file);

// A member name outside `known` is refused: "FILE: unknown key \"vocab\" (known: dtype, ...)".
// `where` prefixes the message (the file, or "FILE: tensor \"x\"").
Status CheckKnownKeys(const JsonValue& object, std::initializer_list<std::string_view> known,
                      std::string_view where);
// Each member name of `object` once: "WHERE: key \"a\" appears twice".
Status CheckUniqueKeys(const JsonValue& object, std::string_view where);

// An integer literal in [min, max]: "WHERE: FIELD: expected an integer in [1, 65536], got 1.5".
Result<uint64_t> JsonUint(const JsonValue& value, uint64_t min, uint64_t max, std::string_view where,
                          std::string_view field);
// A short description of a value for messages: "\"abc\"", "1.5", "an array", "an object".
std::string Describe(const JsonValue& value);

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_JSON_FIELDS_H_
