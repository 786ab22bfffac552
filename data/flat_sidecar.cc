#include "data/flat_sidecar.h"

#include "common/json_writer.h"
#include "data/json_fields.h"

namespace pipecoord::data {

Result<FlatSidecar> ParseFlatSidecar(std::string_view json, std::string_view sidecar_name) {
  auto parsed = ParseJsonObject(json, sidecar_name);
  if (!parsed.ok()) return parsed.status();
  const JsonValue& root = *parsed;
  PIPECOORD_RETURN_IF_ERROR(
      CheckKnownKeys(root, {"dtype", "vocab_size", "tokens", "document_starts", "tokenizer"}, sidecar_name));
  const std::string where(sidecar_name);
  FlatSidecar s;

  const JsonValue* dtype = root.Find("dtype");
  if (dtype == nullptr) return InvalidArgument(where + ": dtype: required (\"uint16\" or \"uint32\")");
  if (dtype->type == JsonValue::Type::kString && dtype->string == "uint16") {
    s.dtype = TokenDtype::kUint16;
  } else if (dtype->type == JsonValue::Type::kString && dtype->string == "uint32") {
    s.dtype = TokenDtype::kUint32;
  } else {
    return InvalidArgument(where + ": dtype: expected \"uint16\" or \"uint32\", got " + Describe(*dtype));
  }

  const JsonValue* vocab = root.Find("vocab_size");
  if (vocab == nullptr) return InvalidArgument(where + ": vocab_size: required (every token id is below it)");
  const uint64_t max_vocab = s.dtype == TokenDtype::kUint16 ? 65536 : (uint64_t{1} << 31);
  auto v = JsonUint(*vocab, 1, max_vocab, where, "vocab_size");
  if (!v.ok()) return v.status();
  s.vocab_size = static_cast<int64_t>(*v);

  if (const JsonValue* tokens = root.Find("tokens")) {
    auto t = JsonUint(*tokens, 0, uint64_t{1} << 62, where, "tokens");
    if (!t.ok()) return t.status();
    s.tokens = *t;
  }

  if (const JsonValue* docs = root.Find("document_starts")) {
    if (!docs->is_array()) {
      return InvalidArgument(where + ": document_starts: expected an array of token offsets, got " + Describe(*docs));
    }
    s.document_starts.reserve(docs->items.size());
    for (size_t i = 0; i < docs->items.size(); ++i) {
      const std::string field = "document_starts[" + std::to_string(i) + "]";
      auto d = JsonUint(docs->items[i], 0, uint64_t{1} << 62, where, field);
      if (!d.ok()) return d.status();
      if (i == 0 && *d != 0) return InvalidArgument(where + ": " + field + ": the first document starts at 0, got " + std::to_string(*d));
      if (i > 0 && *d <= s.document_starts.back()) {
        return InvalidArgument(where + ": " + field + ": " + std::to_string(*d) + " must be greater than the start before it (" +
                               std::to_string(s.document_starts.back()) + ")");
      }
      s.document_starts.push_back(*d);
    }
  }

  if (const JsonValue* tok = root.Find("tokenizer")) {
    if (tok->type != JsonValue::Type::kString) {
      return InvalidArgument(where + ": tokenizer: expected a string, got " + Describe(*tok));
    }
    s.tokenizer = tok->string;
  }
  return s;
}

std::string FlatSidecarJson(const FlatSidecar& s) {
  JsonWriter w;
  w.BeginObject().Key("dtype").String(TokenDtypeName(s.dtype)).Key("vocab_size").Int(s.vocab_size);
  if (s.tokens) w.Key("tokens").Uint(*s.tokens);
  if (!s.document_starts.empty()) {
    w.Key("document_starts").BeginArray();
    for (uint64_t d : s.document_starts) w.Uint(d);
    w.EndArray();
  }
  if (!s.tokenizer.empty()) w.Key("tokenizer").String(s.tokenizer);
  w.EndObject();
  return w.Take() + "\n";
}

Result<uint64_t> CheckFlatBin(const FlatSidecar& s, uint64_t bin_size, std::string_view bin_name,
                              std::string_view sidecar_name) {
  const uint64_t width = static_cast<uint64_t>(TokenDtypeSize(s.dtype));
  const std::string bin(bin_name), side(sidecar_name), dtype = TokenDtypeName(s.dtype);
  if (bin_size % width != 0) {
    return InvalidArgument(bin + ": " + std::to_string(bin_size) + " bytes is not a whole number of " + dtype + " tokens (" +
                           std::to_string(width) + " bytes each, as " + side + " says): the file is truncated");
  }
  const uint64_t tokens = bin_size / width;
  if (s.tokens && *s.tokens != tokens) {
    return InvalidArgument(side + " says " + std::to_string(*s.tokens) + " tokens (" + std::to_string(*s.tokens * width) +
                           " bytes of " + dtype + "), but " + bin + " has " + std::to_string(bin_size) + " bytes (" +
                           std::to_string(tokens) + " tokens)");
  }
  if (!s.document_starts.empty() && s.document_starts.back() >= tokens) {
    return InvalidArgument(side + ": document_starts[" + std::to_string(s.document_starts.size() - 1) + "] = " +
                           std::to_string(s.document_starts.back()) + " is not below the " + std::to_string(tokens) +
                           " tokens of " + bin);
  }
  return tokens;
}

}  // namespace pipecoord::data
