// Hugging Face Llama-family config.json <-> the ModelSpec pipecoord trains (spec.model.hfConfig).
//
// Read: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, vocab_size
// (required), num_key_value_heads, head_dim, rms_norm_eps, rope_theta, max_position_embeddings,
// tie_word_embeddings, hidden_act, rope_scaling, attention_bias, mlp_bias, attention_dropout,
// sliding_window, use_sliding_window, max_window_layers, layer_types, model_type (optional, with transformers' LlamaConfig defaults when absent:
// rms_norm_eps 1e-6, rope_theta 10000, max_position_embeddings 2048, num_key_value_heads =
// num_attention_heads). Every other key (bos_token_id, torch_dtype, ...) is ignored on import and
// copied on export (written as a Llama config).
//
// What the model cannot compute is refused by name with the rule, never silently changed:
// num_key_value_heads not dividing num_attention_heads, an activation other than silu, a rope scaling other than Llama 3's ("llama3":
// factor, low_freq_factor, high_freq_factor, original_max_position_embeddings), biases, dropout,
// an odd head_dim, model_type other than "llama",
// "mistral" or "qwen2" (whose q, k, v biases the workers run), and a sliding window on some layers
// but not others (Qwen2's max_window_layers between 1 and the layer count, mixed layer_types).
#ifndef PIPECOORD_JOBPLAN_HF_CONFIG_H_
#define PIPECOORD_JOBPLAN_HF_CONFIG_H_

#include <string>
#include <string_view>

#include "common/status.h"
#include "data/hf_llama_layout.h"
#include "proto/job.pb.h"

namespace pipecoord::jobplan {

// The fields of a config.json that shape the model.
struct HfLlamaConfig {
  int layers = 0;         // num_hidden_layers
  int hidden = 0;         // hidden_size
  int ffn_hidden = 0;     // intermediate_size
  int heads = 0;          // num_attention_heads
  int kv_heads = 0;       // num_key_value_heads (absent: heads); divides heads
  int head_dim = 0;       // head_dim when not hidden_size / num_attention_heads; 0: that
  int vocab = 0;          // vocab_size
  int max_positions = 2048;  // max_position_embeddings
  // The sliding window every layer's attention uses (Mistral's sliding_window; Qwen2's with
  // use_sliding_window over all layers); 0: none (absent, null, or no layer uses it).
  int sliding_window = 0;
  bool qkv_bias = false;  // model_type "qwen2": q, k, v projections with biases
  // tie_word_embeddings (absent or null: false, the default of LlamaConfig, MistralConfig and
  // Qwen2Config): the LM head is the embedding (Llama 3.2 1B and 3B, Qwen2 0.5B and 1.5B).
  bool tied_embeddings = false;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  // Llama 3's rotary scaling (rope_type "llama3" in rope_scaling or rope_parameters); factor 0:
  // none.
  v1::RopeScaling rope_scaling;
};

// Errors are INVALID_ARGUMENT "FIELD: RULE, got VALUE", FIELD being the config's key
// ("num_key_value_heads: must divide num_attention_heads (8), got 3").
Result<HfLlamaConfig> ParseHfConfig(std::string_view json);

// The spec with spec.model's shape taken from spec.model.hfConfig (the text stays, for the
// record and for export); unchanged when hfConfig is empty. A shape field the spec also gives
// must agree ("spec.model.layers: 4 disagrees with spec.model.hfConfig's num_hidden_layers (2)");
// seqLen must be at most max_position_embeddings. Errors name "spec.model.hfConfig: KEY: ...".
Result<v1::JobSpec> ApplyHfConfig(const v1::JobSpec& spec);

// The weight fields' own rules: spec.model.rmsNormEps and ropeTheta finite and >= 0 (0: Llama's
// default), spec.init at most 4096 bytes without control characters. (Whether the files exist
// and match the model is checked where they can be read: pipectl submit and each worker.)
Status ValidateWeightFields(const v1::JobSpec& spec);

// config.json for a model pipecoord trained (pipectl export): LlamaForCausalLM with the model's
// shape, rms_norm_eps and rope_theta (0 in the spec: Llama's 1e-5 and 10000), tie_word_embeddings
// as the model's, float32,
// max_position_embeddings the larger of seq_len and the original's. Keys of model.hfConfig that
// pipecoord does not interpret (token ids, ...) are copied when they are strings, numbers,
// booleans or null. Reading it back with ParseHfConfig gives the model's shape.
std::string HfConfigJson(const v1::ModelSpec& model);

// The Hugging Face weight files' shape of `model` (hfConfig applied; ffnHidden 0: its default
// rule): what spec.init must hold and pipectl export writes.
data::LlamaShape LlamaShapeOf(const v1::ModelSpec& model);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_HF_CONFIG_H_
