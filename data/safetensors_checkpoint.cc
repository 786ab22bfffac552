#include "data/safetensors_checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>

#include "common/json_writer.h"
#include "data/json_fields.h"
#include "data/mapped_file.h"

namespace pipecoord::data {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string Folder(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

}  // namespace

Result<ShardIndex> ParseShardIndex(std::string_view json, std::string_view index_name) {
  auto parsed = ParseJsonObject(json, index_name);
  if (!parsed.ok()) return parsed.status();
  const std::string where(index_name);
  PIPECOORD_RETURN_IF_ERROR(CheckKnownKeys(*parsed, {"metadata", "weight_map"}, where));
  ShardIndex index;
  if (const JsonValue* metadata = parsed->Find("metadata")) {
    if (!metadata->is_object()) return InvalidArgument(where + ": metadata: expected an object, got " + Describe(*metadata));
    if (const JsonValue* total = metadata->Find("total_size")) {
      auto t = JsonUint(*total, 0, uint64_t{1} << 62, where, "metadata.total_size");
      if (!t.ok()) return t.status();
      index.total_size = *t;
    }
  }
  const JsonValue* map = parsed->Find("weight_map");
  if (map == nullptr) return InvalidArgument(where + ": weight_map: required (tensor name -> shard file)");
  if (!map->is_object()) return InvalidArgument(where + ": weight_map: expected an object, got " + Describe(*map));
  PIPECOORD_RETURN_IF_ERROR(CheckUniqueKeys(*map, where + ": weight_map"));
  for (const auto& [tensor, shard] : map->members) {
    const std::string field = where + ": weight_map: " + JsonString(tensor);
    if (shard.type != JsonValue::Type::kString) {
      return InvalidArgument(field + ": expected a shard file name, got " + Describe(shard));
    }
    const std::string& s = shard.string;
    if (s.empty() || s == "." || s == ".." || s.find('/') != std::string::npos || s.find('\0') != std::string::npos) {
      return InvalidArgument(field + ": shard " + JsonString(s) + " is not a file name in the index's folder");
    }
    index.weight_map.emplace_back(tensor, s);
    if (std::find(index.shards.begin(), index.shards.end(), s) == index.shards.end()) index.shards.push_back(s);
  }
  if (index.weight_map.empty()) return InvalidArgument(where + ": weight_map: lists no tensor");
  return index;
}

std::string ShardIndexJson(const ShardIndex& index) {
  JsonWriter w;
  w.BeginObject().Break("\n  ").Key("metadata").BeginObject();
  if (index.total_size) w.Key("total_size").Uint(*index.total_size);
  w.EndObject().Break("\n  ").Key("weight_map").BeginObject();
  std::vector<std::pair<std::string, std::string>> sorted = index.weight_map;
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [tensor, shard] : sorted) w.Break("\n    ").Key(tensor).String(shard);
  w.Break("\n  ").EndObject().Break("\n").EndObject();
  return w.Take() + "\n";
}

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::Open(const std::string& path) {
  std::string target = path;
  if (IsDirectory(path)) {
    const std::string folder = EndsWith(path, "/") ? path : path + "/";
    const std::string single = folder + kSingleFileName, index = folder + kShardIndexName;
    const bool has_single = Exists(single), has_index = Exists(index);
    if (has_single && has_index) {
      return InvalidArgument(path + ": holds both " + kSingleFileName + " and " + kShardIndexName + "; keep one");
    }
    if (!has_single && !has_index) {
      return InvalidArgument(path + ": holds neither " + std::string(kSingleFileName) + " nor " + kShardIndexName);
    }
    target = has_single ? single : index;
  }
  SafetensorsCheckpoint ckpt;
  ckpt.path_ = target;
  if (!EndsWith(target, ".json")) {
    auto file = SafetensorsFile::Open(target);
    if (!file.ok()) return file.status();
    for (const SafetensorsTensor& t : file->layout().tensors) ckpt.file_of_.emplace(t.name, 0);
    ckpt.files_.push_back(std::move(file).value());
    return ckpt;
  }

  auto text = MappedFile::Open(target);
  if (!text.ok()) return text.status();
  auto index = ParseShardIndex(std::string_view(reinterpret_cast<const char*>(text->bytes().data()), text->size()), target);
  if (!index.ok()) return index.status();
  const std::string folder = Folder(target);
  std::map<std::string, size_t> shard_slot;
  for (const std::string& shard : index->shards) {
    auto file = SafetensorsFile::Open(folder + shard);
    if (!file.ok()) return InvalidArgument(target + ": shard " + JsonString(shard) + ": " + file.status().message());
    shard_slot.emplace(shard, ckpt.files_.size());
    ckpt.files_.push_back(std::move(file).value());
  }
  for (const auto& [tensor, shard] : index->weight_map) {
    const size_t slot = shard_slot.at(shard);
    if (ckpt.files_[slot].layout().Find(tensor) == nullptr) {
      return InvalidArgument(target + ": weight_map puts tensor " + JsonString(tensor) + " in " + shard +
                             ", which has no such tensor");
    }
    ckpt.file_of_.emplace(tensor, slot);
  }
  for (size_t slot = 0; slot < ckpt.files_.size(); ++slot) {
    for (const SafetensorsTensor& t : ckpt.files_[slot].layout().tensors) {
      auto it = ckpt.file_of_.find(t.name);
      if (it == ckpt.file_of_.end() || it->second != slot) {
        return InvalidArgument(target + ": shard " + index->shards[slot] + " holds tensor " + JsonString(t.name) +
                               (it == ckpt.file_of_.end() ? ", which weight_map does not list"
                                                          : ", which weight_map puts in " + index->shards[it->second]));
      }
    }
  }
  return ckpt;
}

std::vector<std::string> SafetensorsCheckpoint::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(file_of_.size());
  for (const auto& [name, slot] : file_of_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

Result<TensorView> SafetensorsCheckpoint::Tensor(std::string_view name) const {
  auto it = file_of_.find(std::string(name));
  if (it == file_of_.end()) return NotFound(path_ + " has no tensor " + JsonString(name));
  return files_[it->second].Tensor(name);
}

}  // namespace pipecoord::data
