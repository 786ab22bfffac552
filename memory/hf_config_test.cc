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
