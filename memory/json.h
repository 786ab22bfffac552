// A small JSON reader. (Writing JSON: common/json_writer.h.)
//
// The reader is meant for untrusted text (configs, programs; a fuzz target): it never throws,
// never recurses deeper than kMaxJsonDepth, and reports the first problem as a Status naming
// the line and column. Numbers keep their double value and, when the text is an integer that
// fits, the exact int64 too.
#ifndef PIPECOORD_MEMORY_JSON_H_
#define PIPECOORD_MEMORY_JSON_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace pipecoord::memory {

inline constexpr int kMaxJsonDepth = 64;

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  // Declared, not implicit: with an implicit one, clang checking std::pair<std::string,
  // JsonValue> (in `members`) asks whether JsonValue is default-constructible, which needs that
  // pair complete first, and fails; gcc does not ask.
  JsonValue();
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  bool is_integer = false;  // the text was an integer literal that fits int64
  int64_t integer = 0;
  std::string string;
  std::vector<JsonValue> items;                            // arrays
  std::vector<std::pair<std::string, JsonValue>> members;  // objects, in text order

  // The member named `key` (the last one when repeated), or nullptr.
  const JsonValue* Find(std::string_view key) const;
  bool is_object() const { return type == Type::kObject; }
  bool is_array() const { return type == Type::kArray; }
};

// "object", "array", "string", "number", "true/false", "null".
const char* JsonTypeName(JsonValue::Type type);

// Parses one JSON document (RFC 8259; surrounding whitespace allowed). Errors read
// "line 3, column 14: expected ',' or '}' after an object member".
Result<JsonValue> ParseJson(std::string_view text);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_JSON_H_
