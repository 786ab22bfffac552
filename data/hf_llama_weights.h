// Llama weights in Hugging Face's safetensors layout, in and out (names and the rotary row
// order: hf_llama_layout.h).
//
// In (spec.init): HfLlamaWeights opens a file, an index or a folder (SafetensorsCheckpoint:
// memory-mapped, shards checked against their index both ways) and checks it against the model
// before anything is read: every tensor the model has is there with its shape [out, in] and a
// float dtype (F32, BF16 or F16), and nothing else is (a bias, a tied or GQA model's tensors
// would be silently dropped otherwise); rotary_emb.inv_freq buffers are ignored. Read() then
// converts one tensor into our layout, so a rank touches only the pages of the layers it holds.
//
// Out (pipectl export): WriteHfLlamaFolder writes config.json and the weights as F32, in one
// model.safetensors or, above max_shard_bytes, in model-0000K-of-0000N.safetensors shards with
// model.safetensors.index.json, as transformers' save_pretrained lays them out.
#ifndef PIPECOORD_DATA_HF_LLAMA_WEIGHTS_H_
#define PIPECOORD_DATA_HF_LLAMA_WEIGHTS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "data/hf_llama_layout.h"
#include "data/safetensors_checkpoint.h"

namespace pipecoord::data {

class HfLlamaWeights {
 public:
  // Errors name the path and the tensor: "w/model.safetensors: tensor
  // \"model.layers.0.self_attn.q_proj.weight\": shape [32, 16], the model needs [32, 32]".
  static Result<HfLlamaWeights> Open(const std::string& path, const LlamaShape& shape);

  // Fills `out` with pipecoord's tensor `our_name` (HfLlamaTensors' our_name, or a tied model's
  // output.weight: the embedding), widened to float, q/k rows in our interleaved rotary order.
  // `out` must hold the tensor's elements.
  Status Read(std::string_view our_name, std::span<float> out) const;

  const std::string& path() const { return checkpoint_.path(); }

 private:
  HfLlamaWeights(SafetensorsCheckpoint checkpoint, LlamaShape shape) : checkpoint_(std::move(checkpoint)), shape_(shape) {}

  SafetensorsCheckpoint checkpoint_;
  LlamaShape shape_;
};

// One tensor of the trained model in pipecoord's names and layout.
struct ModelTensor {
  std::string our_name;
  std::span<const float> values;
};

// Writes DIR/config.json (config_json as given) and the weights (every tensor of
// HfLlamaTensors(shape) exactly once, F32). The folder is created if needed; files are written
// to temporary names and renamed. max_shard_bytes 0: always one file.
Status WriteHfLlamaFolder(const std::string& dir, std::string_view config_json, const LlamaShape& shape,
                          std::span<const ModelTensor> tensors, uint64_t max_shard_bytes);

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_HF_LLAMA_WEIGHTS_H_
