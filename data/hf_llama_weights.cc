#include "data/hf_llama_weights.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unordered_set>
#include <utility>

#include "common/json_writer.h"

namespace pipecoord::data {
namespace {

std::string ShapeText(std::span<const uint64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status WriteText(const std::string& path, std::string_view text) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return Unavailable("cannot create " + tmp + ": " + std::strerror(errno));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return Unavailable("writing " + tmp + ": " + std::strerror(errno));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Unavailable("renaming to " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

std::string ShardName(size_t k, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", k + 1, n);
  return buf;
}

}  // namespace

Result<HfLlamaWeights> HfLlamaWeights::Open(const std::string& path, const LlamaShape& shape) {
  auto opened = SafetensorsCheckpoint::Open(path);
  if (!opened.ok()) return opened.status();
  SafetensorsCheckpoint ckpt = std::move(opened).value();
  const std::string& where = ckpt.path();
  std::unordered_set<std::string> expected;
  for (const HfTensorInfo& t : HfLlamaTensors(shape)) {
    expected.insert(t.hf_name);
    auto view = ckpt.Tensor(t.hf_name);
    if (!view.ok()) {
      return InvalidArgument(where + ": tensor " + JsonString(t.hf_name) + ": missing; the model (" +
                             std::to_string(shape.layers) + " layers) needs it with shape " + ShapeText(t.shape) +
                             (t.hf_name == "lm_head.weight" ? " (a checkpoint of a tied model? its config's "
                                                              "tie_word_embeddings: true ties ours too)"
                                                            : ""));
    }
    const SafetensorsTensor& info = *view->info;
    if (info.shape != t.shape) {
      return InvalidArgument(where + ": tensor " + JsonString(t.hf_name) + ": shape " + ShapeText(info.shape) +
                             ", the model needs " + ShapeText(t.shape));
    }
    if (info.dtype != SafetensorsDtype::kF32 && info.dtype != SafetensorsDtype::kBF16 &&
        info.dtype != SafetensorsDtype::kF16) {
      return InvalidArgument(where + ": tensor " + JsonString(t.hf_name) + ": dtype " + DtypeName(info.dtype) +
                             ", must be F32, BF16 or F16");
    }
  }
  for (const std::string& name : ckpt.TensorNames()) {
    if (expected.count(name) || IsDerivedHfBuffer(name)) continue;
    if (name == "lm_head.weight" && shape.tied_embeddings) {
      return InvalidArgument(where + ": tensor \"lm_head.weight\": not a weight of this model, whose LM head is "
                             "model.embed_tokens.weight (tied embeddings); a checkpoint of an untied model?");
    }
    auto ours = OurNameOf(name);
    const bool bias = ours.ok() && ours->ends_with(".bias");
    return InvalidArgument(where + ": tensor " + JsonString(name) + ": not a weight of this model (" +
                           (bias        ? std::string("its q, k, v projections have no biases: a Qwen2 config's have")
                            : ours.ok() ? "it has " + std::to_string(shape.layers) + " layers"
                                        : std::string("a Llama untied, biases on q, k, v only")) +
                           "); a checkpoint of another model?");
  }
  return HfLlamaWeights(std::move(ckpt), shape);
}

Status HfLlamaWeights::Read(std::string_view our_name, std::span<float> out) const {
  // A tied model's head (a head stage's copy) is the embedding.
  auto hf = shape_.tied_embeddings && our_name == "output.weight" ? Result<std::string>(std::string("model.embed_tokens.weight"))
                                                                  : HfNameOf(our_name);
  if (!hf.ok()) return hf.status();
  auto view = checkpoint_.Tensor(*hf);
  if (!view.ok()) return view.status();
  const SafetensorsTensor& info = *view->info;
  if (out.size() != info.elements()) {
    return InvalidArgument(path() + ": tensor " + JsonString(*hf) + ": " + std::to_string(info.elements()) +
                           " elements, " + std::string(our_name) + " holds " + std::to_string(out.size()));
  }
  if (!HasRotaryRows(*hf)) {
    Status st = view->CopyToFloat(out);
    return st.ok() ? st : InvalidArgument(path() + ": " + st.message());
  }
  std::vector<float> hf_rows(out.size());
  Status st = view->CopyToFloat(hf_rows);
  if (!st.ok()) return InvalidArgument(path() + ": " + st.message());
  HfRotaryToInterleaved(hf_rows, out, shape_.d(),
                        info.shape.size() == 2 ? static_cast<int64_t>(info.shape[1]) : 1);
  return Status::Ok();
}

Status WriteHfLlamaFolder(const std::string& dir, std::string_view config_json, const LlamaShape& shape,
                          std::span<const ModelTensor> tensors, uint64_t max_shard_bytes) {
  std::unordered_map<std::string, const ModelTensor*> by_name;
  for (const ModelTensor& t : tensors) {
    if (!by_name.emplace(t.our_name, &t).second) return InvalidArgument("tensor \"" + t.our_name + "\": given twice");
  }
  const std::vector<HfTensorInfo> layout = HfLlamaTensors(shape);
  if (tensors.size() != layout.size()) {
    for (const ModelTensor& t : tensors) {
      bool known = false;
      for (const HfTensorInfo& i : layout) known = known || i.our_name == t.our_name;
      if (!known) return InvalidArgument("tensor \"" + t.our_name + "\": not a weight of this model");
    }
  }
  // HF layout copies only where rows move (q, k); the rest is written from the caller's buffers.
  std::vector<std::vector<float>> permuted;
  permuted.reserve(2 * static_cast<size_t>(shape.layers));
  std::vector<TensorToWrite> out;
  for (const HfTensorInfo& i : layout) {
    auto it = by_name.find(i.our_name);
    if (it == by_name.end()) return InvalidArgument("tensor \"" + i.our_name + "\": missing (every weight is exported)");
    uint64_t n = 1;
    for (uint64_t d : i.shape) n *= d;
    std::span<const float> values = it->second->values;
    if (values.size() != n) {
      return InvalidArgument("tensor \"" + i.our_name + "\": " + std::to_string(values.size()) +
                             " values, the model's shape " + ShapeText(i.shape) + " holds " + std::to_string(n));
    }
    if (i.rotary_rows) {
      permuted.emplace_back(n);
      InterleavedRotaryToHf(values, permuted.back(), shape.d(),
                            i.shape.size() == 2 ? static_cast<int64_t>(i.shape[1]) : 1);
      values = permuted.back();
    }
    out.push_back({i.hf_name, SafetensorsDtype::kF32, i.shape,
                   std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(values.data()), values.size() * 4)});
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Unavailable("cannot create " + dir + ": " + ec.message());
  const std::vector<std::pair<std::string, std::string>> metadata = {{"format", "pt"}};  // transformers checks it
  // Shards in model order, each up to max_shard_bytes (a tensor larger than that gets its own).
  std::vector<std::vector<TensorToWrite>> shards(1);
  uint64_t in_shard = 0, total = 0;
  for (const TensorToWrite& t : out) {
    if (max_shard_bytes > 0 && in_shard > 0 && in_shard + t.bytes.size() > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(t);
    in_shard += t.bytes.size();
    total += t.bytes.size();
  }
  // A folder holds one layout: the other's files from an earlier export are removed.
  const std::string base = dir + "/";
  if (shards.size() == 1) {
    PIPECOORD_RETURN_IF_ERROR(WriteSafetensorsFile(base + kSingleFileName, shards[0], metadata));
    std::filesystem::remove(base + kShardIndexName, ec);
  } else {
    ShardIndex index;
    index.total_size = total;
    for (size_t k = 0; k < shards.size(); ++k) {
      const std::string name = ShardName(k, shards.size());
      PIPECOORD_RETURN_IF_ERROR(WriteSafetensorsFile(base + name, shards[k], metadata));
      index.shards.push_back(name);
      for (const TensorToWrite& t : shards[k]) index.weight_map.emplace_back(t.name, name);
    }
    PIPECOORD_RETURN_IF_ERROR(WriteText(base + kShardIndexName, ShardIndexJson(index)));
    std::filesystem::remove(base + kSingleFileName, ec);
  }
  return WriteText(base + "config.json", config_json);
}

}  // namespace pipecoord::data
