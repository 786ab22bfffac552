// Sizes from each model's published config (Llama 2 and Llama 3 config.json on the Hugging Face
// hub; GPT-3: Brown et al. 2020, Table 2.1; GPT 22B: Korthikanti et al. 2022, Table 3).
// GPT vocabularies are Megatron's padded 51200 rows.
#include "memory/presets.h"

#include <string>

namespace pipecoord::memory {
namespace {

ModelSpec Llama(const char* name, int layers, int64_t h, int64_t f, int64_t a, int64_t g,
                int64_t vocab, int64_t seq) {
  ModelSpec m;
  m.name = name;
  m.layers = layers;
  m.hidden = h;
  m.ffn = f;
  m.heads = a;
  m.kv_heads = g;
  m.vocab = vocab;
  m.seq_len = seq;
  m.tied_embeddings = false;
  m.norm = Norm::kRmsNorm;
  m.mlp = Mlp::kSwiGlu;
  m.attention = Attention::kFlash;
  return m;
}

ModelSpec Gpt(const char* name, int layers, int64_t h, int64_t a) {
  ModelSpec m;
  m.name = name;
  m.layers = layers;
  m.hidden = h;
  m.ffn = 4 * h;
  m.heads = a;
  m.kv_heads = a;
  m.vocab = 51200;
  m.seq_len = 2048;
  m.tied_embeddings = true;
  m.norm = Norm::kLayerNorm;
  m.mlp = Mlp::kGelu;
  m.attention = Attention::kEager;  // the papers' setting (no flash attention yet)
  m.linear_bias = true;
  m.dropout = true;
  m.learned_positions = 2048;
  return m;
}

}  // namespace

const std::vector<ModelSpec>& ModelPresets() {
  static const std::vector<ModelSpec> kPresets = {
      Llama("llama2-7b", 32, 4096, 11008, 32, 32, 32000, 4096),
      Llama("llama2-13b", 40, 5120, 13824, 40, 40, 32000, 4096),
      Llama("llama2-70b", 80, 8192, 28672, 64, 8, 32000, 4096),
      Llama("llama3-8b", 32, 4096, 14336, 32, 8, 128256, 8192),
      Llama("llama3-70b", 80, 8192, 28672, 64, 8, 128256, 8192),
      Gpt("gpt3-22b", 48, 6144, 64),
      Gpt("gpt3-175b", 96, 12288, 96),
  };
  return kPresets;
}

Result<ModelSpec> FindModelPreset(std::string_view name) {
  std::string known;
  for (const ModelSpec& m : ModelPresets()) {
    if (name == m.name) return m;
    known += (known.empty() ? "" : ", ") + m.name;
  }
  return NotFound("model: unknown preset \"" + std::string(name) + "\" (known: " + known + ")");
}

}  // namespace pipecoord::memory
