#include "data/json_fields.h"

#include <set>

#include "common/json_writer.h"

namespace pipecoord::data {

Result<JsonValue> ParseJsonObject(std::string_view text, std::string_view file) {
  auto parsed = memory::ParseJson(text);
  if (!parsed.ok()) return InvalidArgument(std::string(file) + ": not JSON: " + parsed.status().message());
  if (!parsed->is_object()) {
    return InvalidArgument(std::string(file) + ": expected a JSON object, got " + Describe(*parsed));
  }
  PIPECOORD_RETURN_IF_ERROR(CheckUniqueKeys(*parsed, file));
  return std::move(parsed).value();
}

Status CheckUniqueKeys(const JsonValue& object, std::string_view where) {
  std::set<std::string_view> seen;
  for (const auto& [key, value] : object.members) {
    if (!seen.insert(key).second) {
      return InvalidArgument(std::string(where) + ": key " + JsonString(key) + " appears twice");
    }
  }
  return Status::Ok();
}

Status CheckKnownKeys(const JsonValue& object, std::initializer_list<std::string_view> known,
                      std::string_view where) {
  for (const auto& [key, value] : object.members) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == key;
    if (ok) continue;
    std::string names;
    for (std::string_view k : known) names += (names.empty() ? "" : ", ") + std::string(k);
    return InvalidArgument(std::string(where) + ": unknown key " + JsonString(key) + " (known: " + names + ")");
  }
  return Status::Ok();
}

Result<uint64_t> JsonUint(const JsonValue& value, uint64_t min, uint64_t max, std::string_view where,
                          std::string_view field) {
  const bool in_range = value.type == JsonValue::Type::kNumber && value.is_integer && value.integer >= 0 &&
                        static_cast<uint64_t>(value.integer) >= min && static_cast<uint64_t>(value.integer) <= max;
  if (in_range) return static_cast<uint64_t>(value.integer);
  return InvalidArgument(std::string(where) + ": " + std::string(field) + ": expected an integer in [" +
                         std::to_string(min) + ", " + std::to_string(max) + "], got " + Describe(value));
}

std::string Describe(const JsonValue& value) {
  switch (value.type) {
    case JsonValue::Type::kNull: return "null";
    case JsonValue::Type::kBool: return value.boolean ? "true" : "false";
    case JsonValue::Type::kNumber:
      return value.is_integer ? std::to_string(value.integer) : JsonNumber(value.number);
    case JsonValue::Type::kString: {
      // Long strings are cut: the message names the value, it need not repeat a whole file.
      const std::string_view s = value.string;
      return s.size() <= 40 ? JsonString(s) : JsonString(s.substr(0, 37)) + "...";
    }
    case JsonValue::Type::kArray: return "an array";
    case JsonValue::Type::kObject: return "an object";
  }
  return "?";
}

}  // namespace pipecoord::data
