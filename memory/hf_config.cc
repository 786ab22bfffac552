#include "memory/hf_config.h"

#include <string>

#include "memory/json.h"

namespace pipecoord::memory {
namespace {

constexpr const char* kWhere = "config.json: ";

// The first of `keys` present in `obj`, or nullptr; `found` receives its name.
const JsonValue* FirstOf(const JsonValue& obj, std::initializer_list<const char*> keys,
                         const char** found) {
  for (const char* k : keys) {
    if (const JsonValue* v = obj.Find(k); v != nullptr && v->type != JsonValue::Type::kNull) {
      *found = k;
      return v;
    }
  }
  return nullptr;
}

Status ReadInt(const JsonValue& obj, std::initializer_list<const char*> keys, bool required,
               int64_t* out) {
  const char* key = *keys.begin();
  const JsonValue* v = FirstOf(obj, keys, &key);
  if (v == nullptr) {
    if (required) return InvalidArgument(std::string(kWhere) + key + ": missing");
    return Status::Ok();
  }
  if (v->type != JsonValue::Type::kNumber || !v->is_integer || v->integer < 1) {
    return InvalidArgument(std::string(kWhere) + key + ": expected a positive integer, got a " +
                           JsonTypeName(v->type) +
                           (v->type == JsonValue::Type::kString ? " \"" + v->string + "\"" : ""));
  }
  *out = v->integer;
  return Status::Ok();
}

Status ReadBool(const JsonValue& obj, const char* key, bool* out) {
  const JsonValue* v = obj.Find(key);
  if (v == nullptr || v->type == JsonValue::Type::kNull) return Status::Ok();
  if (v->type != JsonValue::Type::kBool) {
    return InvalidArgument(std::string(kWhere) + key + ": expected true or false, got a " +
                           JsonTypeName(v->type));
  }
  *out = v->boolean;
  return Status::Ok();
}

Status ReadPositiveNumber(const JsonValue& obj, const char* key, bool* positive) {
  const JsonValue* v = obj.Find(key);
  if (v == nullptr || v->type == JsonValue::Type::kNull) return Status::Ok();
  if (v->type != JsonValue::Type::kNumber) {
    return InvalidArgument(std::string(kWhere) + key + ": expected a number, got a " +
                           JsonTypeName(v->type));
  }
  if (v->number > 0) *positive = true;
  return Status::Ok();
}

}  // namespace

Result<ModelSpec> ModelFromHfConfig(std::string_view text) {
  auto doc = ParseJson(text);
  if (!doc.ok()) return InvalidArgument(std::string(kWhere) + doc.status().message());
  const JsonValue& c = *doc;
  if (!c.is_object()) return InvalidArgument(std::string(kWhere) + "expected a JSON object");

  ModelSpec m;
  if (const JsonValue* name = c.Find("model_type"); name && name->type == JsonValue::Type::kString) {
    m.name = name->string;
  } else {
    m.name = "config";
  }
  const bool gpt2 = c.Find("n_embd") != nullptr;
  int64_t layers = 0;
  PIPECOORD_RETURN_IF_ERROR(ReadInt(c, {"num_hidden_layers", "n_layer"}, true, &layers));
  if (layers > 100000) return InvalidArgument(std::string(kWhere) + "num_hidden_layers: must be <= 100000");
  m.layers = static_cast<int>(layers);
  PIPECOORD_RETURN_IF_ERROR(ReadInt(c, {"hidden_size", "n_embd"}, true, &m.hidden));
  PIPECOORD_RETURN_IF_ERROR(ReadInt(c, {"num_attention_heads", "n_head"}, true, &m.heads));
  m.kv_heads = m.heads;
  PIPECOORD_RETURN_IF_ERROR(ReadInt(c, {"num_key_value_heads"}, false, &m.kv_heads));
  // head_dim when it is not hidden / heads (Mistral NeMo: 128 for 5120 / 32): q and o a d wide.
  int64_t head_dim = 0;
  PIPECOORD_RETURN_IF_ERROR(ReadInt(c, {"head_dim"}, false, &head_dim));
  if (head_dim > 0 && (m.hidden % m.heads != 0 || head_dim != m.hidden / m.heads)) m.head_dim = head_dim;
  m.ffn = 4 * m.hidden;  // GPT-2's default when n_inner is null
  PIPECOORD_RETURN_IF_ERROR(ReadInt(c, {"intermediate_size", "n_inner"}, !gpt2, &m.ffn));
  PIPECOORD_RETURN_IF_ERROR(ReadInt(c, {"vocab_size"}, true, &m.vocab));
  PIPECOORD_RETURN_IF_ERROR(ReadInt(c, {"max_position_embeddings", "n_positions"}, true, &m.seq_len));
  m.tied_embeddings = gpt2;  // GPT-2 ties by default; Llama configs say so explicitly
  PIPECOORD_RETURN_IF_ERROR(ReadBool(c, "tie_word_embeddings", &m.tied_embeddings));

  const char* act_key = "hidden_act";
  const JsonValue* act = FirstOf(c, {"hidden_act", "activation_function"}, &act_key);
  m.mlp = gpt2 ? Mlp::kGelu : Mlp::kSwiGlu;
  if (act != nullptr) {
    if (act->type != JsonValue::Type::kString) {
      return InvalidArgument(std::string(kWhere) + act_key + ": expected a string");
    }
    if (act->string == "silu" || act->string == "swish") {
      m.mlp = gpt2 ? Mlp::kGelu : Mlp::kSwiGlu;
    } else if (act->string.rfind("gelu", 0) == 0) {
      m.mlp = Mlp::kGelu;
    } else {
      return InvalidArgument(std::string(kWhere) + act_key + ": unsupported activation \"" +
                             act->string + "\" (known: silu, gelu*)");
    }
  }
  m.norm = (gpt2 || c.Find("layer_norm_eps") || c.Find("layer_norm_epsilon")) && !c.Find("rms_norm_eps")
               ? Norm::kLayerNorm
               : Norm::kRmsNorm;
  m.linear_bias = gpt2;
  bool bias = false;
  PIPECOORD_RETURN_IF_ERROR(ReadBool(c, "attention_bias", &bias));
  PIPECOORD_RETURN_IF_ERROR(ReadBool(c, "mlp_bias", &bias));
  if (bias) m.linear_bias = true;
  bool dropout = false;
  for (const char* k : {"attention_dropout", "hidden_dropout", "resid_pdrop", "attn_pdrop", "embd_pdrop"}) {
    PIPECOORD_RETURN_IF_ERROR(ReadPositiveNumber(c, k, &dropout));
  }
  m.dropout = dropout;
  m.learned_positions = gpt2 ? m.seq_len : 0;
  m.attention = Attention::kFlash;
  PIPECOORD_RETURN_IF_ERROR(ValidateModel(m));
  return m;
}

}  // namespace pipecoord::memory
