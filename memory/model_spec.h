// ModelSpec: the decoder-only transformer whose memory is estimated.
#ifndef PIPECOORD_MEMORY_MODEL_SPEC_H_
#define PIPECOORD_MEMORY_MODEL_SPEC_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pipecoord::memory {

enum class Norm { kRmsNorm, kLayerNorm };
enum class Mlp { kSwiGlu, kGelu };    // SwiGLU: gate and up projections (2f wide), then down
enum class Attention { kEager, kFlash };  // eager keeps the s x s scores; flash does not

struct ModelSpec {
  std::string name;
  int layers = 0;           // transformer blocks
  int64_t hidden = 0;       // h
  int64_t ffn = 0;          // f, the MLP's intermediate size
  int64_t heads = 0;        // a
  int64_t kv_heads = 0;     // g; equal to heads without grouped-query attention
  int64_t vocab = 0;        // v
  int64_t seq_len = 0;      // s, tokens per sample
  bool tied_embeddings = false;  // LM head shares the input embedding's weights
  Norm norm = Norm::kRmsNorm;
  Mlp mlp = Mlp::kSwiGlu;
  Attention attention = Attention::kFlash;
  bool linear_bias = false;  // every linear layer has a bias (GPT-2/3 style)
  bool qkv_bias = false;     // only the q, k, v projections have biases (Qwen2); implied by linear_bias
  bool dropout = false;      // dropout after embedding, attention and MLP: masks are saved
  int64_t learned_positions = 0;  // rows of a learned position embedding; 0: rotary, no weights
  // Features per attention head when not hidden / heads (Mistral NeMo): q and o are heads x d
  // wide, k and v kv_heads x d. 0: hidden / heads. The pipecoord-cuda recipe and the block
  // program refuse it (the CUDA model runs hidden / heads).
  int64_t head_dim = 0;

  int64_t HeadDim() const { return head_dim > 0 ? head_dim : heads > 0 ? hidden / heads : 0; }
  int64_t QWidth() const { return heads * HeadDim(); }  // q and o features
};

// Every size positive, heads divide hidden, kv_heads divide heads, ... Errors name the field
// and the rule: "heads: must divide hidden (4096 % 30 != 0)".
Status ValidateModel(const ModelSpec& model);

const char* NormName(Norm n);            // "rmsnorm", "layernorm"
const char* MlpName(Mlp m);              // "swiglu", "gelu"
const char* AttentionName(Attention a);  // "eager", "flash"
Result<Norm> ParseNorm(std::string_view text);
Result<Mlp> ParseMlp(std::string_view text);
Result<Attention> ParseAttention(std::string_view text);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_MODEL_SPEC_H_
