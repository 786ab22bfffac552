#include "data/hf_llama_layout.h"

#include <algorithm>
#include <charconv>
#include <utility>

namespace pipecoord::data {
namespace {

// Per-layer names: (ours after "layers.N.", HF's after "model.layers.N.").
constexpr std::pair<const char*, const char*> kLayerNames[] = {
    {"attention_norm.weight", "input_layernorm.weight"},
    {"attention.wq.weight", "self_attn.q_proj.weight"},
    {"attention.wk.weight", "self_attn.k_proj.weight"},
    {"attention.wv.weight", "self_attn.v_proj.weight"},
    {"attention.wq.bias", "self_attn.q_proj.bias"},  // Qwen2's q, k, v biases (LlamaShape::qkv_bias)
    {"attention.wk.bias", "self_attn.k_proj.bias"},
    {"attention.wv.bias", "self_attn.v_proj.bias"},
    {"attention.wo.weight", "self_attn.o_proj.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"feed_forward.w1.weight", "mlp.gate_proj.weight"},
    {"feed_forward.w2.weight", "mlp.down_proj.weight"},
    {"feed_forward.w3.weight", "mlp.up_proj.weight"},
};
constexpr std::pair<const char*, const char*> kOtherNames[] = {
    {"tok_embeddings.weight", "model.embed_tokens.weight"},
    {"norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

// "PREFIX" N "." REST -> N and REST; false when `name` is not of that form.
bool SplitLayer(std::string_view name, std::string_view prefix, long long* layer, std::string_view* rest) {
  if (name.substr(0, prefix.size()) != prefix) return false;
  name.remove_prefix(prefix.size());
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0 || (dot > 1 && name[0] == '0')) return false;
  auto [end, ec] = std::from_chars(name.data(), name.data() + dot, *layer);
  if (ec != std::errc() || end != name.data() + dot) return false;
  *rest = name.substr(dot + 1);
  return true;
}

Result<std::string> Map(std::string_view name, bool to_hf) {
  for (const auto& [ours, hf] : kOtherNames) {
    if (name == (to_hf ? ours : hf)) return std::string(to_hf ? hf : ours);
  }
  const std::string_view from_prefix = to_hf ? "layers." : "model.layers.";
  const std::string to_prefix = to_hf ? "model.layers." : "layers.";
  long long layer = 0;
  std::string_view rest;
  if (SplitLayer(name, from_prefix, &layer, &rest)) {
    for (const auto& [ours, hf] : kLayerNames) {
      if (rest == (to_hf ? ours : hf)) return to_prefix + std::to_string(layer) + "." + (to_hf ? hf : ours);
    }
  }
  return InvalidArgument("tensor \"" + std::string(name) + "\": not a weight of the Llama model" +
                         (to_hf ? "" : " (a Hugging Face LlamaForCausalLM untied, biases on q, k, v only)"));
}

void Permute(std::span<const float> in, std::span<float> out, int64_t d, int64_t cols, bool to_interleaved) {
  const int64_t rows = static_cast<int64_t>(in.size()) / cols;
  const int64_t heads = rows / d, half = d / 2;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t interleaved = h * d + 2 * i + j, split = h * d + i + j * half;
        const int64_t from = to_interleaved ? split : interleaved, to = to_interleaved ? interleaved : split;
        std::copy(in.begin() + from * cols, in.begin() + (from + 1) * cols, out.begin() + to * cols);
      }
    }
  }
}

}  // namespace

std::vector<HfTensorInfo> HfLlamaTensors(const LlamaShape& s) {
  const uint64_t h = static_cast<uint64_t>(s.hidden), f = static_cast<uint64_t>(s.ffn),
                 v = static_cast<uint64_t>(s.vocab), kv = static_cast<uint64_t>(s.kv_width()),
                 q = static_cast<uint64_t>(s.q_width());
  std::vector<HfTensorInfo> out;
  out.push_back({"model.embed_tokens.weight", "tok_embeddings.weight", {v, h}, false});
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".", ours = "layers." + std::to_string(l) + ".";
    for (const auto& [o, n] : kLayerNames) {
      const std::string_view name = o;
      const bool bias = name.ends_with(".bias");
      if (bias && !s.qkv_bias) continue;
      std::vector<uint64_t> shape;
      if (name == "attention.wq.bias") {
        shape = {q};
      } else if (bias) {
        shape = {kv};
      } else if (name.find("norm") != std::string_view::npos) {
        shape = {h};
      } else if (name == "feed_forward.w1.weight" || name == "feed_forward.w3.weight") {
        shape = {f, h};
      } else if (name == "feed_forward.w2.weight") {
        shape = {h, f};
      } else if (name == "attention.wk.weight" || name == "attention.wv.weight") {
        shape = {kv, h};
      } else if (name == "attention.wq.weight") {
        shape = {q, h};
      } else {
        shape = {h, q};  // wo
      }
      const bool rotary = name == "attention.wq.weight" || name == "attention.wk.weight" ||
                          name == "attention.wq.bias" || name == "attention.wk.bias";
      out.push_back({hf + n, ours + o, std::move(shape), rotary});
    }
  }
  out.push_back({"model.norm.weight", "norm.weight", {h}, false});
  if (!s.tied_embeddings) out.push_back({"lm_head.weight", "output.weight", {v, h}, false});
  return out;
}

Result<std::string> HfNameOf(std::string_view our_name) { return Map(our_name, true); }
Result<std::string> OurNameOf(std::string_view hf_name) { return Map(hf_name, false); }

bool IsDerivedHfBuffer(std::string_view hf_name) {
  constexpr std::string_view kSuffix = ".self_attn.rotary_emb.inv_freq";
  return hf_name.size() > kSuffix.size() && hf_name.substr(hf_name.size() - kSuffix.size()) == kSuffix &&
         hf_name.substr(0, 13) == "model.layers.";
}

bool HasRotaryRows(std::string_view hf_name) {
  auto ends = [&](std::string_view suffix) {
    return hf_name.size() > suffix.size() && hf_name.substr(hf_name.size() - suffix.size()) == suffix;
  };
  return hf_name.substr(0, 13) == "model.layers." &&
         (ends(".self_attn.q_proj.weight") || ends(".self_attn.k_proj.weight") || ends(".self_attn.q_proj.bias") ||
          ends(".self_attn.k_proj.bias"));
}

void HfRotaryToInterleaved(std::span<const float> hf, std::span<float> ours, int64_t head_dim, int64_t cols) {
  Permute(hf, ours, head_dim, cols, true);
}

void InterleavedRotaryToHf(std::span<const float> ours, std::span<float> hf, int64_t head_dim, int64_t cols) {
  Permute(ours, hf, head_dim, cols, false);
}

}  // namespace pipecoord::data
