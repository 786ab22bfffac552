// Reading a model from a Hugging Face style config.json.
#ifndef PIPECOORD_MEMORY_HF_CONFIG_H_
#define PIPECOORD_MEMORY_HF_CONFIG_H_

#include <string_view>

#include "common/status.h"
#include "memory/model_spec.h"

namespace pipecoord::memory {

// Reads the Llama-style keys (hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, vocab_size, max_position_embeddings,
// tie_word_embeddings, hidden_act, rms_norm_eps / layer_norm_eps, attention_bias, mlp_bias,
// attention_dropout, hidden_dropout) and the GPT-2 ones (n_embd, n_inner, n_layer, n_head,
// n_positions, activation_function, resid_pdrop, attn_pdrop). hidden_act "silu" means a gated
// (SwiGLU) MLP, "gelu*" a plain one; GPT-2 configs have learned positions and biases.
// Attention defaults to flash. The result is validated; errors name the key:
// "config.json: num_attention_heads: expected a positive integer, got \"32\"".
Result<ModelSpec> ModelFromHfConfig(std::string_view json_text);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_HF_CONFIG_H_
