#include "memory/hf_config.h"

#include <gtest/gtest.h>

#include "memory/param_states.h"
#include "memory/presets.h"

namespace pipecoord::memory {
namespace {

// Llama-3-8B's config.json (the keys this reader uses, as published on the hub).
constexpr const char* kLlama3 = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
  "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 8192,
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "vocab_size": 128256, "attention_bias": false,
  "attention_dropout": 0.0})";

TEST(HfConfigTest, LlamaMatchesThePreset) {
  auto m = ModelFromHfConfig(kLlama3);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ModelSpec p = *FindModelPreset("llama3-8b");
  EXPECT_EQ(m->name, "llama");
  EXPECT_EQ(m->layers, p.layers);
  EXPECT_EQ(m->hidden, p.hidden);
  EXPECT_EQ(m->ffn, p.ffn);
  EXPECT_EQ(m->heads, p.heads);
  EXPECT_EQ(m->kv_heads, p.kv_heads);
  EXPECT_EQ(m->vocab, p.vocab);
  EXPECT_EQ(m->seq_len, p.seq_len);
  EXPECT_EQ(m->norm, Norm::kRmsNorm);
  EXPECT_EQ(m->mlp, Mlp::kSwiGlu);
  EXPECT_FALSE(m->tied_embeddings);
  EXPECT_FALSE(m->dropout);
  EXPECT_EQ(TotalParams(*m), 8'030'261'248);
}

// Mistral NeMo 12B's config.json (its keys as published): head_dim 128 where hidden / heads is 160,
// so q and o are 4096 wide. Parameters by the architecture's formula, L (2h + 2h a d + 2h g d +
// 3h f) + 2 V h + h = 12,247,782,400 (the published "12.2B"; with d = 160 it would be 12.77B).
TEST(HfConfigTest, MistralNemoHasItsOwnHeadDim) {
  auto m = ModelFromHfConfig(R"({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_act": "silu",
    "hidden_size": 5120, "head_dim": 128, "intermediate_size": 14336, "max_position_embeddings": 1024000,
    "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false, "vocab_size": 131072})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->head_dim, 128);
  EXPECT_EQ(m->QWidth(), 4096);
  const int64_t h = 5120, a = 32, g = 8, d = 128, f = 14336, V = 131072;
  EXPECT_EQ(TotalParams(*m), 40 * (2 * h + 2 * h * a * d + 2 * h * g * d + 3 * h * f) + 2 * V * h + h);
  EXPECT_EQ(TotalParams(*m), 12'247'782'400);
  // head_dim equal to hidden / heads is the default.
  EXPECT_EQ(ModelFromHfConfig(std::string(kLlama3).replace(1, 0, "\"head_dim\": 128, "))->head_dim, 0);  // 4096 / 32
}

TEST(HfConfigTest, Gpt2) {
  auto m = ModelFromHfConfig(R"({"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12,
      "n_positions": 1024, "vocab_size": 50257, "n_inner": null, "activation_function": "gelu_new",
      "resid_pdrop": 0.1, "layer_norm_epsilon": 1e-05})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->ffn, 3072);
  EXPECT_EQ(m->mlp, Mlp::kGelu);
  EXPECT_EQ(m->norm, Norm::kLayerNorm);
  EXPECT_TRUE(m->tied_embeddings);
  EXPECT_TRUE(m->dropout);
  EXPECT_TRUE(m->linear_bias);
  EXPECT_EQ(TotalParams(*m), 124'439'808);  // GPT-2 small, as published
}

TEST(HfConfigTest, ErrorsNameTheKey) {
  EXPECT_EQ(ModelFromHfConfig("{}").status().message(), "config.json: num_hidden_layers: missing");
  EXPECT_EQ(ModelFromHfConfig(R"({"num_hidden_layers": "32"})").status().message(),
            "config.json: num_hidden_layers: expected a positive integer, got a string \"32\"");
  EXPECT_EQ(ModelFromHfConfig("[1]").status().message(), "config.json: expected a JSON object");
  EXPECT_EQ(ModelFromHfConfig("{").status().message(),
            "config.json: line 1, column 2: expected a quoted member name");
  EXPECT_EQ(ModelFromHfConfig(R"({"num_hidden_layers": 2, "hidden_size": 100, "num_attention_heads": 3,
      "intermediate_size": 8, "vocab_size": 10, "max_position_embeddings": 16})").status().message(),
            "heads: must divide hidden (100 % 3 != 0)");
  EXPECT_EQ(ModelFromHfConfig(R"({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
      "intermediate_size": 8, "vocab_size": 10, "max_position_embeddings": 16, "hidden_act": "relu"})")
                .status().message(),
            "config.json: hidden_act: unsupported activation \"relu\" (known: silu, gelu*)");
}

}  // namespace
}  // namespace pipecoord::memory
