// spec.model.hfConfig: a Hugging Face Llama config.json becomes the model's shape; what the model
// cannot run is refused by its key with the rule; export writes a config that reads back the same.
#include "jobplan/hf_config.h"

#include <gtest/gtest.h>

#include <string>

#include "jobplan/spec_validation.h"
#include "jobplan/tiny_spec_for_tests.h"

namespace pipecoord::jobplan {
namespace {

// TinyLlama-style keys, shrunk (hidden 32, 4 heads, 2 layers).
std::string Config(const std::string& extra = "") {
  return R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
    "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 4, "vocab_size": 64, "rms_norm_eps": 1e-06, "rope_theta": 500000.0,
    "max_position_embeddings": 16, "tie_word_embeddings": false, "hidden_act": "silu",
    "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16")" +
         extra + "}";
}

v1::JobSpec HfSpec(const std::string& config) {
  v1::JobSpec s = TinySpec();
  v1::ModelSpec* m = s.mutable_model();
  m->clear_layers();
  m->clear_hidden();
  m->clear_heads();
  m->clear_vocab();
  m->set_hf_config(config);
  return s;
}

TEST(HfConfigTest, ConfigGivesTheModelShape) {
  auto c = ParseHfConfig(Config());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->layers, 2);
  EXPECT_EQ(c->hidden, 32);
  EXPECT_EQ(c->ffn_hidden, 96);
  EXPECT_EQ(c->heads, 4);
  EXPECT_EQ(c->vocab, 64);
  EXPECT_EQ(c->max_positions, 16);
  EXPECT_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_EQ(c->rope_theta, 500000.0);

  const v1::JobSpec spec = HfSpec(Config());
  ASSERT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec).ToString();
  const v1::JobSpec full = WithDefaults(spec);
  EXPECT_EQ(full.model().layers(), 2);
  EXPECT_EQ(full.model().hidden(), 32);
  EXPECT_EQ(full.model().ffn_hidden(), 96);
  EXPECT_EQ(full.model().heads(), 4);
  EXPECT_EQ(full.model().vocab(), 64);
  EXPECT_EQ(full.model().rms_norm_eps(), 1e-6);
  EXPECT_EQ(full.model().rope_theta(), 500000.0);
  EXPECT_EQ(full.model().hf_config(), Config());  // kept for the record and export
}

TEST(HfConfigTest, AbsentOptionalKeysTakeTransformersLlamaDefaults) {
  auto c = ParseHfConfig(R"({"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                             "num_attention_heads": 2, "vocab_size": 10})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rms_norm_eps, 1e-6);  // LlamaConfig's default, not Llama-2's 1e-5
  EXPECT_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(c->max_positions, 2048);
}

// transformers 5 writes {"rope_parameters": {"rope_theta": ..., "rope_type": "default"}} and no
// top-level rope_theta (tests/hf_weights's transformers-written Llama found it read as 10000).
TEST(HfConfigTest, Transformers5RopeParametersCarryTheBase) {
  const std::string v5 = R"({"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
      "num_attention_heads": 2, "vocab_size": 10, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}})";
  auto c = ParseHfConfig(v5);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_theta, 500000.0);
  auto error = [](const std::string& extra) { return ParseHfConfig(Config(extra)).status().message(); };
  EXPECT_EQ(error(R"(, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "yarn", "factor": 8.0})"),
            "rope_parameters.rope_type: must be \"llama3\" (Llama 3's scaling, the only one the workers run) or "
            "\"default\", got \"yarn\"");
  EXPECT_EQ(error(R"(, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "llama3", "factor": 8.0})"),
            "rope_parameters.low_freq_factor: required (a finite number > 0) for rope_type llama3");
  EXPECT_EQ(error(R"(, "rope_parameters": {"rope_theta": 10000.0})"),
            "rope_parameters.rope_theta: must equal the top-level rope_theta (500000), got 10000");
  EXPECT_EQ(error(R"(, "rope_parameters": 3)"), "rope_parameters: must be an object, got 3");
  EXPECT_EQ(error(R"(, "rope_parameters": {"rope_theta": -1})"),
            "rope_parameters.rope_theta: must be a finite number > 0, got -1");
  EXPECT_TRUE(ParseHfConfig(Config(R"(, "rope_parameters": {"rope_theta": 500000.0})")).ok());
}

// Llama 3.1's rope_scaling (and transformers 5's rope_parameters form) reach spec.model.
TEST(HfConfigTest, Llama3RopeScalingIsRead) {
  const char* llama31 = R"(, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192, "rope_type": "llama3"})";
  auto c = ParseHfConfig(Config(llama31));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling.rope_type(), "llama3");
  EXPECT_EQ(c->rope_scaling.factor(), 8.0);
  EXPECT_EQ(c->rope_scaling.low_freq_factor(), 1.0);
  EXPECT_EQ(c->rope_scaling.high_freq_factor(), 4.0);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings(), 8192);
  auto v5 = ParseHfConfig(Config(R"(, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "llama3", "factor": 32.0,
      "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"));
  ASSERT_TRUE(v5.ok()) << v5.status().ToString();
  EXPECT_EQ(v5->rope_scaling.factor(), 32.0);
  auto spec = ApplyHfConfig(HfSpec(Config(llama31)));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->model().rope_scaling().factor(), 8.0);
  // Exported and read back: the same scaling.
  auto back = ParseHfConfig(HfConfigJson(spec->model()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->rope_scaling.SerializeAsString(), c->rope_scaling.SerializeAsString());
  auto plain = ParseHfConfig(Config(R"(, "rope_scaling": {"rope_type": "default"})"));  // no scaling
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->rope_scaling.factor() > 0);
  EXPECT_EQ(ParseHfConfig(Config(R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0,
      "high_freq_factor": 1.0, "original_max_position_embeddings": 8192})")).status().message(),
            "rope_scaling.high_freq_factor: must be above low_freq_factor (4), got 1");
}

// Grouped-query attention (Llama 3, Mistral, Qwen2): num_key_value_heads becomes spec.model.kvHeads,
// a spec's own kvHeads must agree, tp must divide it, the CUDA backend refuses it by name, and the
// exported config.json carries it back.
TEST(HfConfigTest, GroupedQueryAttentionIsReadCheckedAndExported) {
  auto c = ParseHfConfig(Config(R"(, "num_key_value_heads": 2)"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->kv_heads, 2);
  EXPECT_EQ(ParseHfConfig(Config())->kv_heads, c->heads) << "absent: as many as the heads";
  auto spec = ApplyHfConfig(HfSpec(Config(R"(, "num_key_value_heads": 2)")));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->model().kv_heads(), 2);
  EXPECT_EQ(ParseHfConfig(HfConfigJson(spec->model()))->kv_heads, 2);
  v1::JobSpec s = HfSpec(Config(R"(, "num_key_value_heads": 2)"));
  EXPECT_TRUE(ValidateJobSpec(s).ok()) << ValidateJobSpec(s).ToString();
  s.mutable_model()->set_kv_heads(1);
  EXPECT_EQ(ValidateJobSpec(s).message(),
            "spec.model.kvHeads: 1 disagrees with spec.model.hfConfig's num_key_value_heads (2); "
            "give one of them or make them agree");
  s.mutable_model()->set_kv_heads(0);
  s.set_tp(4);
  EXPECT_EQ(ValidateJobSpec(s).message().rfind("spec.tp: must divide spec.model.kvHeads (2", 0), 0u)
      << ValidateJobSpec(s).message();
  s.set_tp(1);
  s.set_device("cuda");  // the CUDA backend runs grouped-query attention too
  EXPECT_TRUE(ValidateJobSpec(s).ok()) << ValidateJobSpec(s).ToString();
  v1::JobSpec plain = TinySpec();  // 4 heads
  plain.mutable_model()->set_kv_heads(3);
  EXPECT_EQ(ValidateJobSpec(plain).message(), "spec.model.kvHeads: must divide spec.model.heads (4), got 3");
}

// Mistral: Llama's architecture with a sliding attention window, which the CPU and CUDA workers
// run (spec.model.slidingWindow);
// exported as a Mistral config with its window.
TEST(HfConfigTest, MistralBringsItsSlidingWindow) {
  auto c = ParseHfConfig(Config(R"(, "model_type": "mistral", "sliding_window": 4096)"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->sliding_window, 4096);
  v1::JobSpec s = HfSpec(Config(R"(, "model_type": "mistral", "sliding_window": 8, "max_position_embeddings": 64)"));
  s.mutable_model()->set_seq_len(16);
  EXPECT_TRUE(ValidateJobSpec(s).ok()) << ValidateJobSpec(s).ToString();
  auto applied = ApplyHfConfig(s);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ(applied->model().sliding_window(), 8);
  const std::string exported = HfConfigJson(applied->model());
  EXPECT_NE(exported.find("\"model_type\": \"mistral\""), std::string::npos) << exported;
  EXPECT_EQ(ParseHfConfig(exported)->sliding_window, 8) << exported;
  v1::JobSpec cuda = s;
  cuda.set_device("cuda");  // the CUDA backend's flash attention runs the window too
  EXPECT_TRUE(ValidateJobSpec(cuda).ok()) << ValidateJobSpec(cuda).ToString();
  v1::JobSpec disagree = s;
  disagree.mutable_model()->set_sliding_window(4);
  EXPECT_EQ(ValidateJobSpec(disagree).message(),
            "spec.model.slidingWindow: 4 disagrees with spec.model.hfConfig's sliding_window (8); give one of them or "
            "make them agree");
  EXPECT_TRUE(ParseHfConfig(Config(R"(, "model_type": "mistral", "sliding_window": null)")).ok());
  EXPECT_EQ(ParseHfConfig(Config(R"(, "model_type": "mistral", "sliding_window": -1)")).status().message(),
            "sliding_window: must be an integer in 1..1073741824, got -1");
}

// Qwen2's window: with use_sliding_window, on layers max_window_layers and up (layer_types, when
// written, says it per layer); one window over every layer or none runs, a mix is refused.
TEST(HfConfigTest, Qwen2SlidingWindowCoversEveryLayerOrNone) {
  auto window = [](const std::string& extra) {
    auto c = ParseHfConfig(Config(R"(, "model_type": "qwen2", "use_sliding_window": true, "sliding_window": 4)" + extra));
    return c.ok() ? std::to_string(c->sliding_window) : c.status().message();
  };
  EXPECT_EQ(window(R"(, "max_window_layers": 0)"), "4");
  EXPECT_EQ(window(""), "0") << "Qwen2Config's default max_window_layers (28) is past the 2 layers";
  EXPECT_EQ(window(R"(, "max_window_layers": 2)"), "0");
  EXPECT_EQ(window(R"(, "max_window_layers": 1)"),
            "max_window_layers: the workers run one attention in every layer, so the sliding window must cover all "
            "layers (0) or none (>= num_hidden_layers, 2), got 1");
  EXPECT_EQ(window(R"(, "layer_types": ["sliding_attention", "sliding_attention"])"), "4");
  EXPECT_EQ(window(R"(, "layer_types": ["full_attention", "full_attention"])"), "0");
  EXPECT_EQ(window(R"(, "layer_types": ["full_attention", "sliding_attention"])").rfind("layer_types: must list", 0), 0u);
  auto c = ParseHfConfig(Config(R"(, "model_type": "qwen2", "use_sliding_window": true, "sliding_window": 4,
      "max_window_layers": 0)"));
  ASSERT_TRUE(c.ok());
  v1::JobSpec s = HfSpec(Config(R"(, "model_type": "qwen2", "use_sliding_window": true, "sliding_window": 4,
      "max_window_layers": 0)"));
  auto applied = ApplyHfConfig(s);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  const std::string exported = HfConfigJson(applied->model());
  EXPECT_EQ(ParseHfConfig(exported)->sliding_window, 4) << exported;
  EXPECT_TRUE(ParseHfConfig(exported)->qkv_bias);
}

// Qwen2: biases on q, k, v (spec.model.qkvBias), its window unused unless use_sliding_window;
// exported as a Qwen2 config (a Llama's attention_bias would put one on o_proj too).
TEST(HfConfigTest, Qwen2BringsQkvBiases) {
  const std::string qwen2 = Config(R"(, "model_type": "qwen2", "use_sliding_window": false, "sliding_window": 4,
      "layer_types": ["full_attention", "full_attention"])");
  auto c = ParseHfConfig(qwen2);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_EQ(c->sliding_window, 0) << "not in use";
  auto spec = ApplyHfConfig(HfSpec(qwen2));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->model().qkv_bias());
  const std::string exported = HfConfigJson(spec->model());
  EXPECT_NE(exported.find("\"model_type\": \"qwen2\""), std::string::npos) << exported;
  EXPECT_TRUE(ParseHfConfig(exported)->qkv_bias);
  EXPECT_FALSE(ParseHfConfig(Config())->qkv_bias);
  v1::JobSpec llama = HfSpec(Config());
  llama.mutable_model()->set_qkv_bias(true);
  EXPECT_EQ(ValidateJobSpec(llama).message(),
            "spec.model.qkvBias: true disagrees with spec.model.hfConfig, whose q, k and v projections have no bias "
            "(model_type \"qwen2\" has them)");
  v1::JobSpec cuda = HfSpec(qwen2);
  cuda.set_device("cuda");  // the CUDA backend runs the biases too
  EXPECT_TRUE(ValidateJobSpec(cuda).ok()) << ValidateJobSpec(cuda).ToString();
}

// Llama 3.2 1B and 3B tie the LM head to the embedding: read, given to the spec, checked against
// a spec that says otherwise, and exported (absent means untied, as LlamaConfig's default).
TEST(HfConfigTest, TiedEmbeddingsAreReadCheckedAndExported) {
  EXPECT_FALSE(ParseHfConfig(Config())->tied_embeddings);
  auto spec = ApplyHfConfig(HfSpec(Config(R"(, "tie_word_embeddings": true)")));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_TRUE(spec->model().tied_embeddings());
  EXPECT_TRUE(ParseHfConfig(HfConfigJson(spec->model()))->tied_embeddings);
  EXPECT_NE(HfConfigJson(spec->model()).find(R"("tie_word_embeddings": true)"), std::string::npos);
  EXPECT_FALSE(ParseHfConfig(HfConfigJson(WithDefaults(TinySpec()).model()))->tied_embeddings);
  v1::JobSpec untied = HfSpec(Config());
  untied.mutable_model()->set_tied_embeddings(true);
  EXPECT_EQ(ApplyHfConfig(untied).status().message(),
            "spec.model.tiedEmbeddings: true disagrees with spec.model.hfConfig, whose tie_word_embeddings is false (its "
            "lm_head is a matrix of its own)");
}

// An explicit head_dim (Mistral NeMo's 128 for 5120 / 32 heads): q and o heads x head_dim wide. Equal
// to hidden / heads it is the default (0 in the spec); another value travels to the spec and back.
TEST(HfConfigTest, AnExplicitHeadDimIsReadCheckedAndExported) {
  EXPECT_EQ(ParseHfConfig(Config(R"(, "head_dim": 8)"))->head_dim, 0);
  auto spec = ApplyHfConfig(HfSpec(Config(R"(, "head_dim": 16)")));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->model().head_dim(), 16);
  EXPECT_EQ(ParseHfConfig(HfConfigJson(spec->model()))->head_dim, 16);
  EXPECT_EQ(jobplan::LlamaShapeOf(spec->model()).q_width(), 64);  // 4 heads of 16, hidden 32
  v1::JobSpec other = HfSpec(Config(R"(, "head_dim": 16)"));
  other.mutable_model()->set_head_dim(8);
  EXPECT_EQ(ApplyHfConfig(other).status().message(),
            "spec.model.headDim: must agree with spec.model.hfConfig's head_dim (16), got 8");
  // 3 heads do not divide 32, but heads of 12 are fine.
  auto odd_heads = ParseHfConfig(Config(R"(, "num_attention_heads": 3, "num_key_value_heads": 3, "head_dim": 12)"));
  ASSERT_TRUE(odd_heads.ok()) << odd_heads.status().ToString();
  EXPECT_EQ(odd_heads->head_dim, 12);
}

TEST(HfConfigTest, WhatTheModelCannotRunIsRefusedByKey) {
  auto error = [](const std::string& extra) { return ParseHfConfig(Config(extra)).status().message(); };
  // Config()'s own keys come first; a repeated key's last value wins (memory::JsonValue::Find).
  EXPECT_EQ(error(R"(, "num_key_value_heads": 3)"), "num_key_value_heads: must divide num_attention_heads (4), got 3");
  EXPECT_EQ(error(R"(, "num_key_value_heads": 0)"), "num_key_value_heads: must be an integer in 1..1073741824, got 0");
  EXPECT_EQ(error(R"(, "tie_word_embeddings": "yes")"), "tie_word_embeddings: must be true or false, got \"yes\"");
  EXPECT_EQ(error(R"(, "hidden_act": "gelu")"), "hidden_act: must be \"silu\" (the MLP is SwiGLU), got \"gelu\"");
  EXPECT_EQ(error(R"(, "model_type": "gemma")"),
            "model_type: must be \"llama\", \"mistral\" or \"qwen2\" (the Llama architecture is the one the workers "
            "run), got \"gemma\"");
  EXPECT_EQ(error(R"(, "layer_types": ["full_attention", "sliding_attention"])"),
            "layer_types: must list \"full_attention\" for every layer, or \"sliding_attention\" for every layer with a "
            "sliding_window (the workers run one attention in every layer), got array");
  EXPECT_EQ(error(R"(, "rope_scaling": {"type": "linear", "factor": 2.0})"),
            "rope_scaling.rope_type: must be \"llama3\" (Llama 3's scaling, the only one the workers run) or "
            "\"default\", got \"linear\"");
  EXPECT_EQ(error(R"(, "attention_bias": true)"),
            "attention_bias: must be false: the attention projections have no bias, got true");
  EXPECT_EQ(error(R"(, "mlp_bias": true)"), "mlp_bias: must be false: the MLP projections have no bias, got true");
  EXPECT_EQ(error(R"(, "attention_dropout": 0.1)"),
            "attention_dropout: must be 0: the workers' model has no dropout, got 0.1");
  EXPECT_EQ(error(R"(, "head_dim": 15)"), "head_dim: must be even (rotary embeddings rotate pairs), got 15");
  EXPECT_EQ(error(R"(, "rms_norm_eps": 0)"), "rms_norm_eps: must be a finite number > 0, got 0");
  EXPECT_EQ(error(R"(, "rope_theta": "big")"), "rope_theta: must be a finite number > 0, got \"big\"");
  EXPECT_EQ(error(R"(, "hidden_size": 32.5)"), "hidden_size: must be an integer in 1..1073741824, got 32.5");
  EXPECT_EQ(error(R"(, "num_attention_heads": 5)"), "num_attention_heads: must divide hidden_size (32), got 5");
  EXPECT_EQ(error(R"(, "num_attention_heads": 32)"),
            "num_attention_heads: hidden_size / num_attention_heads must be even (rotary embeddings rotate "
            "pairs), got 32 / 32");
  EXPECT_EQ(ParseHfConfig(R"({"hidden_size": 32})").status().message(),
            "num_hidden_layers: required (a Llama config.json has it)");
  EXPECT_EQ(ParseHfConfig("[1]").status().message(), "must be a JSON object (a config.json), got array");
  EXPECT_EQ(ParseHfConfig("{").status().message().rfind("not JSON: line 1", 0), 0u);
}

TEST(HfConfigTest, TheSpecNamesHfConfigAndDisagreements) {
  EXPECT_EQ(ValidateJobSpec(HfSpec(Config(R"(, "num_key_value_heads": 3)"))).message(),
            "spec.model.hfConfig: num_key_value_heads: must divide num_attention_heads (4), got 3");
  v1::JobSpec s = HfSpec(Config());
  s.mutable_model()->set_layers(4);
  EXPECT_EQ(ValidateJobSpec(s).message(),
            "spec.model.layers: 4 disagrees with spec.model.hfConfig's num_hidden_layers (2); give one of them or "
            "make them agree");
  s = HfSpec(Config());
  s.mutable_model()->set_layers(2);  // agreeing is fine
  s.mutable_model()->set_rms_norm_eps(1e-6);
  EXPECT_TRUE(ValidateJobSpec(s).ok());
  s.mutable_model()->set_rope_theta(10000);
  EXPECT_EQ(ValidateJobSpec(s).message(),
            "spec.model.ropeTheta: 10000 disagrees with spec.model.hfConfig's rope_theta (500000); give one of "
            "them or make them agree");
  s = HfSpec(Config());
  s.mutable_model()->set_seq_len(17);
  EXPECT_EQ(ValidateJobSpec(s).message(),
            "spec.model.seqLen: must be at most spec.model.hfConfig's max_position_embeddings (16), got 17");
  s = HfSpec(Config());
  s.set_pp(3);  // the expanded spec is checked as any other: 2 layers cannot fill 3 ranks
  EXPECT_EQ(ValidateJobSpec(s).message(),
            "spec.model.layers: must be >= spec.pp x spec.vpp = 3 (a layer for each stage), got 2");
}

TEST(HfConfigTest, WeightFieldsHaveTheirRules) {
  v1::JobSpec s = TinySpec();
  s.mutable_model()->set_rms_norm_eps(-1);
  EXPECT_EQ(ValidateJobSpec(s).message(),
            "spec.model.rmsNormEps: must be a finite number >= 0 (0: Llama's default), got -1");
  s = TinySpec();
  s.set_init(std::string("w\n"));
  EXPECT_EQ(ValidateJobSpec(s).message(), "spec.init: must not contain control characters");
  s.set_init(std::string(4097, 'a'));
  EXPECT_EQ(ValidateJobSpec(s).message(), "spec.init: must be at most 4096 bytes, got 4097");
}

TEST(HfConfigTest, ExportedConfigReadsBackAsTheSameModelAndKeepsOtherKeys) {
  const v1::JobSpec full = WithDefaults(HfSpec(Config()));
  const std::string json = HfConfigJson(full.model());
  auto back = ParseHfConfig(json);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << json;
  EXPECT_EQ(back->layers, 2);
  EXPECT_EQ(back->hidden, 32);
  EXPECT_EQ(back->ffn_hidden, 96);
  EXPECT_EQ(back->heads, 4);
  EXPECT_EQ(back->vocab, 64);
  EXPECT_EQ(back->rms_norm_eps, 1e-6);
  EXPECT_EQ(back->rope_theta, 500000.0);
  EXPECT_EQ(back->max_positions, 16);
  EXPECT_NE(json.find("\"bos_token_id\": 1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"torch_dtype\": \"float32\""), std::string::npos) << json;  // what export writes
  EXPECT_EQ(json.find("bfloat16"), std::string::npos) << json;

  // A model without hfConfig: Llama's defaults written out, seq_len as the positions.
  const std::string plain = HfConfigJson(WithDefaults(TinySpec()).model());
  auto p = ParseHfConfig(plain);
  ASSERT_TRUE(p.ok()) << p.status().ToString() << "\n" << plain;
  EXPECT_EQ(p->rms_norm_eps, 1e-5);
  EXPECT_EQ(p->rope_theta, 10000.0);
  EXPECT_EQ(p->max_positions, 8);
  EXPECT_EQ(p->layers, 4);
}

}  // namespace
}  // namespace pipecoord::jobplan
