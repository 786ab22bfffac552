#include "memory/program_json.h"

#include "common/json_writer.h"
#include "memory/json.h"

namespace pipecoord::memory {
namespace {

constexpr size_t kMaxOps = 1'000'000;
constexpr size_t kMaxDims = 16;

Status Bad(const std::string& where, const std::string& what) { return InvalidArgument(where + ": " + what); }

Status ReadString(const JsonValue& obj, const char* key, const std::string& where, bool required,
                  std::string* out) {
  const JsonValue* v = obj.Find(key);
  if (v == nullptr) return required ? Bad(where + "." + key, "missing") : Status::Ok();
  if (v->type != JsonValue::Type::kString) {
    return Bad(where + "." + key, std::string("expected a string, got ") + JsonTypeName(v->type));
  }
  *out = v->string;
  return Status::Ok();
}

Status ReadBool(const JsonValue& obj, const char* key, const std::string& where, bool* out) {
  const JsonValue* v = obj.Find(key);
  if (v == nullptr) return Status::Ok();
  if (v->type != JsonValue::Type::kBool) {
    return Bad(where + "." + key, std::string("expected true or false, got ") + JsonTypeName(v->type));
  }
  *out = v->boolean;
  return Status::Ok();
}

Status ReadTensor(const JsonValue& v, const std::string& where, TensorRef* t) {
  if (v.type == JsonValue::Type::kString) {
    t->id = v.string;
    t->dtype.clear();  // "as declared where it first appears"
  } else if (v.is_object()) {
    PIPECOORD_RETURN_IF_ERROR(ReadString(v, "id", where, true, &t->id));
    t->dtype.clear();
    PIPECOORD_RETURN_IF_ERROR(ReadString(v, "dtype", where, false, &t->dtype));
    if (!t->dtype.empty() && DtypeBytes(t->dtype) == 0) {
      return Bad(where + ".dtype", "unknown dtype \"" + t->dtype +
                                       "\" (known: fp32, bf16, fp16, fp8, fp64, int64, int32, int8, u8, bool)");
    }
    if (const JsonValue* s = v.Find("shape")) {
      if (!s->is_array() || s->items.size() > kMaxDims) {
        return Bad(where + ".shape", "expected an array of at most 16 non-negative integers");
      }
      t->shape_given = true;
      for (const JsonValue& d : s->items) {
        if (d.type != JsonValue::Type::kNumber || !d.is_integer || d.integer < 0) {
          return Bad(where + ".shape", "expected an array of non-negative integers");
        }
        t->shape.push_back(d.integer);
      }
    }
    PIPECOORD_RETURN_IF_ERROR(ReadBool(v, "persistable", where, &t->persistable));
    PIPECOORD_RETURN_IF_ERROR(ReadBool(v, "inplace", where, &t->inplace));
    PIPECOORD_RETURN_IF_ERROR(ReadString(v, "inplace_of", where, false, &t->inplace_of));
    if (!t->inplace_of.empty()) t->inplace = true;
  } else {
    return Bad(where, std::string("expected a tensor object or an id string, got ") + JsonTypeName(v.type));
  }
  if (t->id.empty()) return Bad(where + ".id", "must not be empty");
  return Status::Ok();
}

Status ReadTensors(const JsonValue& op, const char* key, const std::string& where,
                   std::vector<TensorRef>* out) {
  const JsonValue* list = op.Find(key);
  if (list == nullptr) return Status::Ok();
  if (!list->is_array()) return Bad(where + "." + key, std::string("expected an array, got ") + JsonTypeName(list->type));
  for (size_t i = 0; i < list->items.size(); ++i) {
    TensorRef t;
    PIPECOORD_RETURN_IF_ERROR(
        ReadTensor(list->items[i], where + "." + key + "[" + std::to_string(i) + "]", &t));
    out->push_back(std::move(t));
  }
  return Status::Ok();
}

std::string TensorJson(const TensorRef& t) {
  std::string s = "{\"id\": " + JsonString(t.id);
  if (t.shape_given) {
    s += ", \"shape\": [";
    for (size_t d = 0; d < t.shape.size(); ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
    s += "]";
  }
  if (!t.dtype.empty()) s += ", \"dtype\": " + JsonString(t.dtype);
  if (t.persistable) s += ", \"persistable\": true";
  if (t.inplace) s += ", \"inplace\": true";
  if (!t.inplace_of.empty()) s += ", \"inplace_of\": " + JsonString(t.inplace_of);
  return s + "}";
}

}  // namespace

Result<ProgramSet> ParseProgramJson(std::string_view text) {
  auto doc = ParseJson(text);
  if (!doc.ok()) return doc.status();
  if (!doc->is_object()) return InvalidArgument("program: expected a JSON object with \"programs\"");
  ProgramSet set;
  const JsonValue* programs = doc->Find("programs");
  if (programs == nullptr) return InvalidArgument("programs: missing");
  if (!programs->is_array()) return InvalidArgument("programs: expected an array");
  size_t total_ops = 0;
  for (size_t p = 0; p < programs->items.size(); ++p) {
    const std::string pw = "programs[" + std::to_string(p) + "]";
    const JsonValue& pj = programs->items[p];
    if (!pj.is_object()) return Bad(pw, "expected an object");
    Program prog;
    prog.name = "program " + std::to_string(p);
    PIPECOORD_RETURN_IF_ERROR(ReadString(pj, "name", pw, false, &prog.name));
    const JsonValue* ops = pj.Find("ops");
    if (ops == nullptr) return Bad(pw + ".ops", "missing");
    if (!ops->is_array()) return Bad(pw + ".ops", "expected an array");
    total_ops += ops->items.size();
    if (total_ops > kMaxOps) return Bad(pw + ".ops", "more than 1000000 ops in all");
    for (size_t o = 0; o < ops->items.size(); ++o) {
      const std::string ow = pw + ".ops[" + std::to_string(o) + "]";
      const JsonValue& oj = ops->items[o];
      if (!oj.is_object()) return Bad(ow, "expected an object");
      ProgramOp op;
      op.name = "op " + std::to_string(o);
      PIPECOORD_RETURN_IF_ERROR(ReadString(oj, "name", ow, false, &op.name));
      PIPECOORD_RETURN_IF_ERROR(ReadTensors(oj, "inputs", ow, &op.inputs));
      PIPECOORD_RETURN_IF_ERROR(ReadTensors(oj, "outputs", ow, &op.outputs));
      prog.ops.push_back(std::move(op));
    }
    set.programs.push_back(std::move(prog));
  }
  if (const JsonValue* keep = doc->Find("keep")) {
    if (!keep->is_array()) return InvalidArgument("keep: expected an array of tensor ids");
    for (size_t i = 0; i < keep->items.size(); ++i) {
      if (keep->items[i].type != JsonValue::Type::kString) {
        return InvalidArgument("keep[" + std::to_string(i) + "]: expected a tensor id string");
      }
      set.keep.push_back(keep->items[i].string);
    }
  }
  return set;
}

std::string ProgramSetToJson(const ProgramSet& set) {
  std::string o = "{\"programs\": [";
  for (size_t p = 0; p < set.programs.size(); ++p) {
    const Program& prog = set.programs[p];
    o += std::string(p ? ",\n  " : "\n  ") + "{\"name\": " + JsonString(prog.name) + ", \"ops\": [";
    for (size_t i = 0; i < prog.ops.size(); ++i) {
      const ProgramOp& op = prog.ops[i];
      o += std::string(i ? ",\n    " : "\n    ") + "{\"name\": " + JsonString(op.name) + ",\n     \"inputs\": [";
      for (size_t k = 0; k < op.inputs.size(); ++k) o += (k ? ", " : "") + TensorJson(op.inputs[k]);
      o += "],\n     \"outputs\": [";
      for (size_t k = 0; k < op.outputs.size(); ++k) o += (k ? ", " : "") + TensorJson(op.outputs[k]);
      o += "]}";
    }
    o += "]}";
  }
  o += "],\n \"keep\": [";
  for (size_t i = 0; i < set.keep.size(); ++i) o += (i ? ", " : "") + JsonString(set.keep[i]);
  return o + "]}\n";
}

}  // namespace pipecoord::memory
