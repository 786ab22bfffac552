#include "data/safetensors_format.h"

#include <algorithm>
#include <numeric>

#include "common/json_writer.h"
#include "data/json_fields.h"
#include "data/little_endian.h"

namespace pipecoord::data {
namespace {

struct DtypeEntry {
  SafetensorsDtype dtype;
  const char* name;
  int size;
};

constexpr DtypeEntry kDtypes[] = {
    {SafetensorsDtype::kBool, "BOOL", 1},       {SafetensorsDtype::kU8, "U8", 1},
    {SafetensorsDtype::kI8, "I8", 1},           {SafetensorsDtype::kF8E5M2, "F8_E5M2", 1},
    {SafetensorsDtype::kF8E4M3, "F8_E4M3", 1},  {SafetensorsDtype::kI16, "I16", 2},
    {SafetensorsDtype::kU16, "U16", 2},         {SafetensorsDtype::kF16, "F16", 2},
    {SafetensorsDtype::kBF16, "BF16", 2},       {SafetensorsDtype::kI32, "I32", 4},
    {SafetensorsDtype::kU32, "U32", 4},         {SafetensorsDtype::kF32, "F32", 4},
    {SafetensorsDtype::kF64, "F64", 8},         {SafetensorsDtype::kI64, "I64", 8},
    {SafetensorsDtype::kU64, "U64", 8},
};

const DtypeEntry& Entry(SafetensorsDtype dtype) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.dtype == dtype) return e;
  }
  return kDtypes[0];
}

std::string KnownDtypes() {
  std::string s;
  for (const DtypeEntry& e : kDtypes) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string Range(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// The elements of `shape` times `size`, or nothing when it exceeds 2^63.
std::optional<uint64_t> ByteCount(const std::vector<uint64_t>& shape, int size) {
  unsigned __int128 n = static_cast<unsigned __int128>(size);
  const unsigned __int128 limit = static_cast<unsigned __int128>(1) << 63;
  for (uint64_t d : shape) {
    n *= d;
    if (n > limit) {
      // A zero dimension later still makes the tensor empty.
      if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
      return std::nullopt;
    }
  }
  return static_cast<uint64_t>(n);
}

bool IsUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t bad = 0;
    const size_t len = Utf8SequenceLength(s, i, &bad);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

Result<SafetensorsTensor> ParseTensor(const std::string& name, const JsonValue& v, const std::string& file) {
  const std::string where = file + ": tensor " + JsonString(name);
  if (!v.is_object()) return InvalidArgument(where + ": expected an object {dtype, shape, data_offsets}, got " + Describe(v));
  PIPECOORD_RETURN_IF_ERROR(CheckUniqueKeys(v, where));
  PIPECOORD_RETURN_IF_ERROR(CheckKnownKeys(v, {"dtype", "shape", "data_offsets"}, where));
  SafetensorsTensor t;
  t.name = name;

  const JsonValue* dtype = v.Find("dtype");
  if (dtype == nullptr) return InvalidArgument(where + ": dtype: required");
  std::optional<SafetensorsDtype> d;
  if (dtype->type == JsonValue::Type::kString) d = ParseSafetensorsDtype(dtype->string);
  if (!d) return InvalidArgument(where + ": unknown dtype " + Describe(*dtype) + " (known: " + KnownDtypes() + ")");
  t.dtype = *d;

  const JsonValue* shape = v.Find("shape");
  if (shape == nullptr) return InvalidArgument(where + ": shape: required");
  if (!shape->is_array()) return InvalidArgument(where + ": shape: expected an array of dimensions, got " + Describe(*shape));
  for (size_t i = 0; i < shape->items.size(); ++i) {
    auto dim = JsonUint(shape->items[i], 0, uint64_t{1} << 62, where, "shape[" + std::to_string(i) + "]");
    if (!dim.ok()) return dim.status();
    t.shape.push_back(*dim);
  }

  const JsonValue* offsets = v.Find("data_offsets");
  if (offsets == nullptr) return InvalidArgument(where + ": data_offsets: required");
  if (!offsets->is_array() || offsets->items.size() != 2) {
    return InvalidArgument(where + ": data_offsets: expected [BEGIN, END], got " + Describe(*offsets) +
                           (offsets->is_array() ? " of " + std::to_string(offsets->items.size()) + " values" : ""));
  }
  auto begin = JsonUint(offsets->items[0], 0, uint64_t{1} << 63, where, "data_offsets[0]");
  if (!begin.ok()) return begin.status();
  auto end = JsonUint(offsets->items[1], 0, uint64_t{1} << 63, where, "data_offsets[1]");
  if (!end.ok()) return end.status();
  t.begin = *begin;
  t.end = *end;
  if (t.begin > t.end) return InvalidArgument(where + ": data_offsets " + Range(t.begin, t.end) + ": begins after it ends");

  const std::optional<uint64_t> need = ByteCount(t.shape, DtypeSize(t.dtype));
  if (!need) return InvalidArgument(where + ": shape " + ShapeText(t.shape) + " has too many elements");
  if (*need != t.bytes()) {
    return InvalidArgument(where + ": data_offsets " + Range(t.begin, t.end) + " hold " + std::to_string(t.bytes()) +
                           " bytes, but " + DtypeName(t.dtype) + " " + ShapeText(t.shape) + " takes " +
                           std::to_string(*need));
  }
  return t;
}

}  // namespace

const char* DtypeName(SafetensorsDtype dtype) { return Entry(dtype).name; }
int DtypeSize(SafetensorsDtype dtype) { return Entry(dtype).size; }

std::optional<SafetensorsDtype> ParseSafetensorsDtype(std::string_view name) {
  for (const DtypeEntry& e : kDtypes) {
    if (name == e.name) return e.dtype;
  }
  return std::nullopt;
}

uint64_t SafetensorsTensor::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

const SafetensorsTensor* SafetensorsLayout::Find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &tensors[it->second];
}

Result<SafetensorsLayout> ParseSafetensors(std::span<const uint8_t> file, std::string_view file_name) {
  const std::string name(file_name);
  if (file.size() < 8) {
    return InvalidArgument(name + ": truncated: " + std::to_string(file.size()) +
                           " bytes, the header length alone takes 8");
  }
  const uint64_t n = LoadU64(file.data());
  if (n > kSafetensorsMaxHeaderBytes) {
    return InvalidArgument(name + ": header length " + std::to_string(n) + " is over the limit of " +
                           std::to_string(kSafetensorsMaxHeaderBytes) + " bytes (100 MiB)");
  }
  if (n > file.size() - 8) {
    return InvalidArgument(name + ": header length " + std::to_string(n) + " runs past the end of the file (" +
                           std::to_string(file.size() - 8) + " bytes after the length field)");
  }
  const std::string_view header(reinterpret_cast<const char*>(file.data()) + 8, n);
  if (header.empty() || header[0] != '{') {
    return InvalidArgument(name + ": the header must be a JSON object starting with '{'");
  }
  auto parsed = memory::ParseJson(header);
  if (!parsed.ok()) return InvalidArgument(name + ": the header is not JSON: " + parsed.status().message());
  const JsonValue& root = *parsed;

  SafetensorsLayout layout;
  layout.data_start = 8 + n;
  layout.data_size = file.size() - layout.data_start;
  bool have_metadata = false;
  for (const auto& [key, value] : root.members) {
    if (key == "__metadata__") {
      if (have_metadata) return InvalidArgument(name + ": \"__metadata__\" appears twice in the header");
      have_metadata = true;
      if (!value.is_object()) {
        return InvalidArgument(name + ": __metadata__: expected an object of strings, got " + Describe(value));
      }
      PIPECOORD_RETURN_IF_ERROR(CheckUniqueKeys(value, name + ": __metadata__"));
      for (const auto& [k, v] : value.members) {
        if (v.type != JsonValue::Type::kString) {
          return InvalidArgument(name + ": __metadata__: " + JsonString(k) + ": expected a string, got " + Describe(v));
        }
        layout.metadata.emplace_back(k, v.string);
      }
      continue;
    }
    if (layout.by_name_.count(key) != 0) {
      return InvalidArgument(name + ": tensor " + JsonString(key) + " appears twice in the header");
    }
    auto t = ParseTensor(key, value, name);
    if (!t.ok()) return t.status();
    if (t->end > layout.data_size) {
      return InvalidArgument(name + ": tensor " + JsonString(key) + ": data_offsets " + Range(t->begin, t->end) +
                             " run past the end of the data buffer (" + std::to_string(layout.data_size) + " bytes)");
    }
    layout.by_name_.emplace(key, layout.by_name_.size());
    layout.tensors.push_back(std::move(t).value());
  }

  // The tensors must tile the data buffer: ordered by offset, each begins where the last ended.
  std::stable_sort(layout.tensors.begin(), layout.tensors.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const SafetensorsTensor* previous = nullptr;
  for (const SafetensorsTensor& t : layout.tensors) {
    if (t.begin < expected) {
      return InvalidArgument(name + ": tensor " + JsonString(t.name) + " at " + Range(t.begin, t.end) +
                             " overlaps tensor " + JsonString(previous->name) + " at " +
                             Range(previous->begin, previous->end));
    }
    if (t.begin > expected) {
      return InvalidArgument(name + ": bytes [" + std::to_string(expected) + ", " + std::to_string(t.begin) +
                             ") of the data buffer belong to no tensor (a gap before tensor " + JsonString(t.name) + ")");
    }
    expected = t.end;
    previous = &t;
  }
  if (expected != layout.data_size) {
    return InvalidArgument(name + ": the data buffer has " + std::to_string(layout.data_size - expected) +
                           " bytes after " + (previous ? "the last tensor, " + JsonString(previous->name) : "the header, but no tensors") +
                           " (the tensors must cover it exactly)");
  }
  layout.by_name_.clear();
  for (size_t i = 0; i < layout.tensors.size(); ++i) layout.by_name_.emplace(layout.tensors[i].name, i);
  return layout;
}

Result<SafetensorsPlan> PlanSafetensors(std::span<const TensorToWrite> tensors,
                                        std::span<const std::pair<std::string, std::string>> metadata) {
  std::unordered_map<std::string_view, size_t> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorToWrite& t = tensors[i];
    const std::string where = "tensor " + JsonString(t.name);
    if (t.name == "__metadata__") return InvalidArgument(where + ": the name is reserved for the metadata");
    if (!IsUtf8(t.name)) return InvalidArgument(where + ": the name is not UTF-8");
    if (!seen.emplace(t.name, i).second) return InvalidArgument(where + " is given twice");
    const std::optional<uint64_t> need = ByteCount(t.shape, DtypeSize(t.dtype));
    if (!need) return InvalidArgument(where + ": shape " + ShapeText(t.shape) + " has too many elements");
    if (*need != t.bytes.size()) {
      return InvalidArgument(where + ": " + std::to_string(t.bytes.size()) + " bytes given, " + DtypeName(t.dtype) + " " +
                             ShapeText(t.shape) + " takes " + std::to_string(*need));
    }
  }
  std::unordered_map<std::string_view, int> metadata_keys;
  for (const auto& [k, v] : metadata) {
    if (!IsUtf8(k) || !IsUtf8(v)) return InvalidArgument("__metadata__: " + JsonString(k) + ": not UTF-8");
    if (++metadata_keys[k] > 1) return InvalidArgument("__metadata__: key " + JsonString(k) + " is given twice");
  }

  SafetensorsPlan plan;
  plan.order.resize(tensors.size());
  std::iota(plan.order.begin(), plan.order.end(), size_t{0});
  std::stable_sort(plan.order.begin(), plan.order.end(), [&](size_t a, size_t b) {
    const int sa = DtypeSize(tensors[a].dtype), sb = DtypeSize(tensors[b].dtype);
    return sa != sb ? sa > sb : tensors[a].name < tensors[b].name;
  });

  JsonWriter w(JsonWriter::Style::kCompact);
  w.BeginObject();
  if (!metadata.empty()) {
    w.Key("__metadata__").BeginObject();
    for (const auto& [k, v] : metadata) w.Key(k).String(v);
    w.EndObject();
  }
  uint64_t offset = 0;
  for (size_t i : plan.order) {
    const TensorToWrite& t = tensors[i];
    w.Key(t.name).BeginObject().Key("dtype").String(DtypeName(t.dtype)).Key("shape").BeginArray();
    for (uint64_t d : t.shape) w.Uint(d);
    w.EndArray().Key("data_offsets").BeginArray().Uint(offset).Uint(offset + t.bytes.size()).EndArray().EndObject();
    offset += t.bytes.size();
  }
  w.EndObject();
  std::string header = w.Take();
  header.append((8 - header.size() % 8) % 8, ' ');  // the data buffer starts at a multiple of 8
  if (header.size() > kSafetensorsMaxHeaderBytes) {
    return InvalidArgument("the header would take " + std::to_string(header.size()) + " bytes, over the 100 MiB limit");
  }
  AppendLittleEndian(&plan.head, header.size(), 8);
  plan.head += header;
  plan.data_size = offset;
  return plan;
}

Result<std::string> SerializeSafetensors(std::span<const TensorToWrite> tensors,
                                         std::span<const std::pair<std::string, std::string>> metadata) {
  auto plan = PlanSafetensors(tensors, metadata);
  if (!plan.ok()) return plan.status();
  std::string out = std::move(plan->head);
  out.reserve(out.size() + plan->data_size);
  for (size_t i : plan->order) out.append(reinterpret_cast<const char*>(tensors[i].bytes.data()), tensors[i].bytes.size());
  return out;
}

}  // namespace pipecoord::data
