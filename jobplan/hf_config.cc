#include "jobplan/hf_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <utility>

#include "common/json_writer.h"
#include "jobplan/spec_validation.h"
#include "memory/json.h"

namespace pipecoord::jobplan {
namespace {

using memory::JsonValue;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The value as its JSON text, for messages.
std::string Shown(const JsonValue& v) {
  switch (v.type) {
    case JsonValue::Type::kNull: return "null";
    case JsonValue::Type::kBool: return v.boolean ? "true" : "false";
    case JsonValue::Type::kNumber: return v.is_integer ? std::to_string(v.integer) : Num(v.number);
    case JsonValue::Type::kString: return JsonString(v.string);
    default: return memory::JsonTypeName(v.type);
  }
}

Status Bad(std::string_view key, const std::string& rule, const JsonValue& v) {
  return InvalidArgument(std::string(key) + ": " + rule + ", got " + Shown(v));
}

// A required (or, with `fallback`, optional) integer in [1, 1 << 30].
Status ReadInt(const JsonValue& root, const char* key, int* out, bool required, int least = 1) {
  const JsonValue* v = root.Find(key);
  if (v == nullptr || (!required && v->type == JsonValue::Type::kNull)) {
    if (required) return InvalidArgument(std::string(key) + ": required (a Llama config.json has it)");
    return Status::Ok();
  }
  if (v->type != JsonValue::Type::kNumber || !v->is_integer || v->integer < least || v->integer > (1 << 30)) {
    return Bad(key, "must be an integer in " + std::to_string(least) + "..1073741824", *v);
  }
  *out = static_cast<int>(v->integer);
  return Status::Ok();
}

Status ReadPositive(const JsonValue& root, const char* key, double* out) {
  const JsonValue* v = root.Find(key);
  if (v == nullptr || v->type == JsonValue::Type::kNull) return Status::Ok();
  if (v->type != JsonValue::Type::kNumber || !(v->number > 0) || !std::isfinite(v->number)) {
    return Bad(key, "must be a finite number > 0", *v);
  }
  *out = v->number;
  return Status::Ok();
}

// An optional flag that must be false (absent counts as false).
Status MustBeFalse(const JsonValue& root, const char* key, const char* why) {
  const JsonValue* v = root.Find(key);
  if (v == nullptr || v->type == JsonValue::Type::kNull) return Status::Ok();
  if (v->type != JsonValue::Type::kBool) return Bad(key, "must be true or false", *v);
  if (v->boolean) return Bad(key, std::string("must be false: ") + why, *v);
  return Status::Ok();
}

// Llama 3's rope scaling from `v` (config.json's rope_scaling, or transformers 5's
// rope_parameters): {"rope_type" (or "type"): "llama3", "factor", "low_freq_factor",
// "high_freq_factor", "original_max_position_embeddings"}; any other type refused by name.
Status ReadRopeScaling(const std::string& where, const JsonValue& v, v1::RopeScaling* out) {
  if (!v.is_object()) return Bad(where, "must be an object or null", v);
  const JsonValue* type = v.Find("rope_type");
  if (type == nullptr || type->type == JsonValue::Type::kNull) type = v.Find("type");
  if (type != nullptr && type->type == JsonValue::Type::kString && type->string == "default") return Status::Ok();
  if (type == nullptr || type->type != JsonValue::Type::kString || type->string != "llama3") {
    return type != nullptr ? Bad(where + ".rope_type", "must be \"llama3\" (Llama 3's scaling, the only one the workers "
                                                      "run) or \"default\"", *type)
                           : InvalidArgument(where + ".rope_type: required (\"llama3\")");
  }
  out->set_rope_type("llama3");
  double factor = 0, low = 0, high = 0, original = 0;
  for (auto [key, dst] : {std::pair<const char*, double*>{"factor", &factor}, {"low_freq_factor", &low},
                          {"high_freq_factor", &high}, {"original_max_position_embeddings", &original}}) {
    const JsonValue* x = v.Find(key);
    if (x == nullptr || x->type != JsonValue::Type::kNumber || !(x->number > 0) || !std::isfinite(x->number)) {
      return x == nullptr ? InvalidArgument(where + "." + key + ": required (a finite number > 0) for rope_type llama3")
                          : Bad(where + "." + key, "must be a finite number > 0", *x);
    }
    *dst = x->number;
  }
  if (!(high > low)) {
    return Bad(where + ".high_freq_factor", "must be above low_freq_factor (" + Num(low) + ")", *v.Find("high_freq_factor"));
  }
  out->set_factor(factor);
  out->set_low_freq_factor(low);
  out->set_high_freq_factor(high);
  out->set_original_max_position_embeddings(static_cast<int32_t>(original));
  return Status::Ok();
}

// The keys ParseHfConfig reads and HfConfigJson writes itself.
const std::set<std::string, std::less<>>& InterpretedKeys() {
  static const std::set<std::string, std::less<>> keys = {
      "architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
      "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size", "rms_norm_eps",
      "rope_theta", "max_position_embeddings", "tie_word_embeddings", "hidden_act", "rope_scaling",
      "attention_bias", "mlp_bias", "attention_dropout", "torch_dtype", "rope_parameters", "sliding_window",
      "use_sliding_window", "max_window_layers", "layer_types"};
  return keys;
}

Status Agree(const char* field, long long given, const char* key, long long from_config) {
  if (given == 0 || given == from_config) return Status::Ok();
  return InvalidArgument(std::string("spec.model.") + field + ": " + std::to_string(given) +
                         " disagrees with spec.model.hfConfig's " + key + " (" + std::to_string(from_config) +
                         "); give one of them or make them agree");
}

Status AgreeNum(const char* field, double given, const char* key, double from_config) {
  if (given == 0 || given == from_config) return Status::Ok();
  return InvalidArgument(std::string("spec.model.") + field + ": " + Num(given) +
                         " disagrees with spec.model.hfConfig's " + key + " (" + Num(from_config) +
                         "); give one of them or make them agree");
}

}  // namespace

Result<HfLlamaConfig> ParseHfConfig(std::string_view json) {
  auto parsed = memory::ParseJson(json);
  if (!parsed.ok()) return InvalidArgument("not JSON: " + parsed.status().message());
  const JsonValue& root = *parsed;
  if (!root.is_object()) {
    return InvalidArgument(std::string("must be a JSON object (a config.json), got ") + memory::JsonTypeName(root.type));
  }
  std::string model_type = "llama";  // absent: transformers' LlamaConfig
  if (const JsonValue* t = root.Find("model_type"); t != nullptr && t->type != JsonValue::Type::kNull) {
    // Mistral is Llama's architecture with a sliding attention window (spec.model.slidingWindow),
    // which transformers loads with the same weight names.
    // Qwen2 is Llama's architecture with biases on q, k and v (and an optional sliding window).
    if (t->type != JsonValue::Type::kString ||
        (t->string != "llama" && t->string != "mistral" && t->string != "qwen2")) {
      return Bad("model_type",
                 "must be \"llama\", \"mistral\" or \"qwen2\" (the Llama architecture is the one the workers run)", *t);
    }
    model_type = t->string;
  }
  HfLlamaConfig c;
  PIPECOORD_RETURN_IF_ERROR(ReadInt(root, "num_hidden_layers", &c.layers, true));
  PIPECOORD_RETURN_IF_ERROR(ReadInt(root, "hidden_size", &c.hidden, true));
  PIPECOORD_RETURN_IF_ERROR(ReadInt(root, "intermediate_size", &c.ffn_hidden, true));
  PIPECOORD_RETURN_IF_ERROR(ReadInt(root, "num_attention_heads", &c.heads, true));
  PIPECOORD_RETURN_IF_ERROR(ReadInt(root, "vocab_size", &c.vocab, true));
  PIPECOORD_RETURN_IF_ERROR(ReadInt(root, "max_position_embeddings", &c.max_positions, false));
  // head_dim given and not hidden / heads (Mistral NeMo: 5120 / 32 heads of 128): q and o are
  // heads x head_dim wide. Absent, null or equal: the default, 0 in the spec.
  int head_dim = 0;
  PIPECOORD_RETURN_IF_ERROR(ReadInt(root, "head_dim", &head_dim, false));
  if (head_dim % 2 != 0) {
    return InvalidArgument("head_dim: must be even (rotary embeddings rotate pairs), got " + std::to_string(head_dim));
  }
  if (head_dim > 0 && (c.hidden % c.heads != 0 || head_dim != c.hidden / c.heads)) c.head_dim = head_dim;
  if (c.head_dim == 0 && c.hidden % c.heads != 0) {
    return InvalidArgument("num_attention_heads: must divide hidden_size (" + std::to_string(c.hidden) + "), got " +
                           std::to_string(c.heads));
  }
  if (c.head_dim == 0 && (c.hidden / c.heads) % 2 != 0) {
    return InvalidArgument("num_attention_heads: hidden_size / num_attention_heads must be even (rotary embeddings "
                           "rotate pairs), got " + std::to_string(c.hidden) + " / " + std::to_string(c.heads));
  }
  c.kv_heads = c.heads;
  PIPECOORD_RETURN_IF_ERROR(ReadInt(root, "num_key_value_heads", &c.kv_heads, false));
  if (c.kv_heads < 1 || c.heads % c.kv_heads != 0) {
    return InvalidArgument("num_key_value_heads: must divide num_attention_heads (" + std::to_string(c.heads) +
                           "), got " + std::to_string(c.kv_heads));
  }
  PIPECOORD_RETURN_IF_ERROR(ReadInt(root, "sliding_window", &c.sliding_window, false));
  const JsonValue* types = root.Find("layer_types");
  if (types != nullptr && types->type == JsonValue::Type::kNull) types = nullptr;
  if (model_type == "qwen2") {
    c.qkv_bias = true;
    // Qwen2's window applies only with use_sliding_window (false in every released config), and
    // then to layers max_window_layers and up (transformers' Qwen2Config, unless layer_types says).
    const JsonValue* use = root.Find("use_sliding_window");
    if (use == nullptr || use->type == JsonValue::Type::kNull || (use->type == JsonValue::Type::kBool && !use->boolean)) {
      c.sliding_window = 0;
    } else if (use->type != JsonValue::Type::kBool) {
      return Bad("use_sliding_window", "must be true or false", *use);
    } else if (types == nullptr && c.sliding_window > 0) {
      int from = 28;  // Qwen2Config's default
      PIPECOORD_RETURN_IF_ERROR(ReadInt(root, "max_window_layers", &from, false, /*least=*/0));
      if (from >= c.layers) {
        c.sliding_window = 0;  // no layer reaches it
      } else if (from > 0) {
        return InvalidArgument("max_window_layers: the workers run one attention in every layer, so the sliding window "
                               "must cover all layers (0) or none (>= num_hidden_layers, " + std::to_string(c.layers) +
                               "), got " + std::to_string(from));
      }
    }
  }
  // layer_types (transformers 4.53 and later write it): every layer's attention, all the same.
  if (types != nullptr) {
    bool all_full = types->type == JsonValue::Type::kArray, all_sliding = all_full;
    for (size_t i = 0; types->type == JsonValue::Type::kArray && i < types->items.size(); ++i) {
      const bool str = types->items[i].type == JsonValue::Type::kString;
      all_full = all_full && str && types->items[i].string == "full_attention";
      all_sliding = all_sliding && str && types->items[i].string == "sliding_attention";
    }
    if (all_full) {
      c.sliding_window = 0;
    } else if (!all_sliding || c.sliding_window == 0) {
      return Bad("layer_types",
                 "must list \"full_attention\" for every layer, or \"sliding_attention\" for every layer with a "
                 "sliding_window (the workers run one attention in every layer)", *types);
    }
  }
  PIPECOORD_RETURN_IF_ERROR(ReadPositive(root, "rms_norm_eps", &c.rms_norm_eps));
  PIPECOORD_RETURN_IF_ERROR(ReadPositive(root, "rope_theta", &c.rope_theta));
  // transformers 5 writes the rotary settings as "rope_parameters": {"rope_type", "rope_theta",
  // ...} instead of a top-level rope_theta and rope_scaling: the base is read there, and any
  // rope_type but "default" (Llama 3's "llama3", "linear", "yarn", ...) is refused as rope_scaling is.
  if (const JsonValue* r = root.Find("rope_parameters"); r != nullptr && r->type != JsonValue::Type::kNull) {
    if (!r->is_object()) return Bad("rope_parameters", "must be an object", *r);
    if (const JsonValue* t = r->Find("rope_type"); t != nullptr && t->type != JsonValue::Type::kNull) {
      if (t->type == JsonValue::Type::kString && t->string != "default") {
        PIPECOORD_RETURN_IF_ERROR(ReadRopeScaling("rope_parameters", *r, &c.rope_scaling));
      }
    }
    double theta = 0;
    if (Status st = ReadPositive(*r, "rope_theta", &theta); !st.ok()) {
      return InvalidArgument("rope_parameters." + st.message());
    }
    if (theta > 0) {
      // A top-level rope_theta was read into c.rope_theta above (already checked to be a number).
      if (const JsonValue* top = root.Find("rope_theta"); top != nullptr && top->type != JsonValue::Type::kNull &&
                                                          c.rope_theta != theta) {
        return Bad("rope_parameters.rope_theta", "must equal the top-level rope_theta (" + Num(c.rope_theta) + ")",
                   *r->Find("rope_theta"));
      }
      c.rope_theta = theta;
    }
  }
  if (const JsonValue* act = root.Find("hidden_act"); act != nullptr && act->type != JsonValue::Type::kNull) {
    if (act->type != JsonValue::Type::kString || act->string != "silu") {
      return Bad("hidden_act", "must be \"silu\" (the MLP is SwiGLU)", *act);
    }
  }
  if (const JsonValue* tie = root.Find("tie_word_embeddings"); tie != nullptr && tie->type != JsonValue::Type::kNull) {
    if (tie->type != JsonValue::Type::kBool) return Bad("tie_word_embeddings", "must be true or false", *tie);
    c.tied_embeddings = tie->boolean;
  }
  PIPECOORD_RETURN_IF_ERROR(MustBeFalse(root, "attention_bias", "the attention projections have no bias"));
  PIPECOORD_RETURN_IF_ERROR(MustBeFalse(root, "mlp_bias", "the MLP projections have no bias"));
  if (const JsonValue* s = root.Find("rope_scaling"); s != nullptr && s->type != JsonValue::Type::kNull) {
    PIPECOORD_RETURN_IF_ERROR(ReadRopeScaling("rope_scaling", *s, &c.rope_scaling));
  }
  if (const JsonValue* d = root.Find("attention_dropout"); d != nullptr && d->type != JsonValue::Type::kNull) {
    if (d->type != JsonValue::Type::kNumber || d->number != 0) {
      return Bad("attention_dropout", "must be 0: the workers' model has no dropout", *d);
    }
  }
  return c;
}

Result<v1::JobSpec> ApplyHfConfig(const v1::JobSpec& spec) {
  if (spec.model().hf_config().empty()) return spec;
  auto c = ParseHfConfig(spec.model().hf_config());
  if (!c.ok()) return InvalidArgument("spec.model.hfConfig: " + c.status().message());
  const v1::ModelSpec& m = spec.model();
  PIPECOORD_RETURN_IF_ERROR(Agree("layers", m.layers(), "num_hidden_layers", c->layers));
  PIPECOORD_RETURN_IF_ERROR(Agree("hidden", m.hidden(), "hidden_size", c->hidden));
  PIPECOORD_RETURN_IF_ERROR(Agree("ffnHidden", m.ffn_hidden(), "intermediate_size", c->ffn_hidden));
  PIPECOORD_RETURN_IF_ERROR(Agree("heads", m.heads(), "num_attention_heads", c->heads));
  PIPECOORD_RETURN_IF_ERROR(Agree("kvHeads", m.kv_heads(), "num_key_value_heads", c->kv_heads));
  if (const int d = c->head_dim > 0 ? c->head_dim : c->hidden / c->heads; m.head_dim() != 0 && m.head_dim() != d) {
    return InvalidArgument("spec.model.headDim: must agree with spec.model.hfConfig's head_dim (" + std::to_string(d) +
                           "), got " + std::to_string(m.head_dim()));
  }
  if (m.qkv_bias() && !c->qkv_bias) {
    return InvalidArgument("spec.model.qkvBias: true disagrees with spec.model.hfConfig, whose q, k and v projections "
                           "have no bias (model_type \"qwen2\" has them)");
  }
  if (m.tied_embeddings() && !c->tied_embeddings) {
    return InvalidArgument("spec.model.tiedEmbeddings: true disagrees with spec.model.hfConfig, whose "
                           "tie_word_embeddings is false (its lm_head is a matrix of its own)");
  }
  PIPECOORD_RETURN_IF_ERROR(Agree("vocab", m.vocab(), "vocab_size", c->vocab));
  PIPECOORD_RETURN_IF_ERROR(AgreeNum("rmsNormEps", m.rms_norm_eps(), "rms_norm_eps", c->rms_norm_eps));
  PIPECOORD_RETURN_IF_ERROR(AgreeNum("ropeTheta", m.rope_theta(), "rope_theta", c->rope_theta));
  PIPECOORD_RETURN_IF_ERROR(Agree("slidingWindow", m.sliding_window(), "sliding_window", c->sliding_window));
  if (m.seq_len() > c->max_positions) {
    return InvalidArgument("spec.model.seqLen: must be at most spec.model.hfConfig's max_position_embeddings (" +
                           std::to_string(c->max_positions) + "), got " + std::to_string(m.seq_len()));
  }
  v1::JobSpec out = spec;
  v1::ModelSpec* o = out.mutable_model();
  o->set_layers(c->layers);
  o->set_hidden(c->hidden);
  o->set_ffn_hidden(c->ffn_hidden);
  o->set_heads(c->heads);
  o->set_kv_heads(c->kv_heads);
  o->set_head_dim(c->head_dim);
  o->set_qkv_bias(c->qkv_bias);
  o->set_tied_embeddings(c->tied_embeddings);
  o->set_sliding_window(c->sliding_window);
  o->set_vocab(c->vocab);
  o->set_rms_norm_eps(c->rms_norm_eps);
  o->set_rope_theta(c->rope_theta);
  if (c->rope_scaling.factor() > 0) {
    *o->mutable_rope_scaling() = c->rope_scaling;
  } else {
    o->clear_rope_scaling();
  }
  return out;
}

Status ValidateWeightFields(const v1::JobSpec& spec) {
  for (const auto& [field, v] : {std::pair<const char*, double>{"rmsNormEps", spec.model().rms_norm_eps()},
                                 {"ropeTheta", spec.model().rope_theta()}}) {
    if (!std::isfinite(v) || v < 0) {
      return InvalidArgument(std::string("spec.model.") + field + ": must be a finite number >= 0 (0: Llama's "
                             "default), got " + Num(v));
    }
  }
  if (spec.model().has_rope_scaling()) {
    const v1::RopeScaling& r = spec.model().rope_scaling();
    if (r.rope_type() != "llama3") {
      return InvalidArgument("spec.model.ropeScaling.ropeType: must be \"llama3\" (Llama 3's scaling, the only one the "
                             "workers run), got \"" + r.rope_type() + "\"");
    }
    for (const auto& [field, v] : {std::pair<const char*, double>{"factor", r.factor()}, {"lowFreqFactor", r.low_freq_factor()},
                                   {"highFreqFactor", r.high_freq_factor()},
                                   {"originalMaxPositionEmbeddings", double(r.original_max_position_embeddings())}}) {
      if (!(v > 0) || !std::isfinite(v)) {
        return InvalidArgument(std::string("spec.model.ropeScaling.") + field + ": must be a finite number > 0, got " + Num(v));
      }
    }
    if (!(r.high_freq_factor() > r.low_freq_factor())) {
      return InvalidArgument("spec.model.ropeScaling.highFreqFactor: must be above lowFreqFactor (" + Num(r.low_freq_factor()) +
                             "), got " + Num(r.high_freq_factor()));
    }
  }
  if (spec.init().size() > 4096) {
    return InvalidArgument("spec.init: must be at most 4096 bytes, got " + std::to_string(spec.init().size()));
  }
  for (unsigned char c : spec.init()) {
    if (c < 0x20 || c == 0x7f) return InvalidArgument("spec.init: must not contain control characters");
  }
  return Status::Ok();
}

data::LlamaShape LlamaShapeOf(const v1::ModelSpec& m) {
  data::LlamaShape s{m.layers(), m.hidden(), m.heads(), FfnHiddenOf(m), m.vocab(), m.kv_heads(), m.qkv_bias()};
  s.tied_embeddings = m.tied_embeddings();
  s.head_dim = m.head_dim();
  return s;
}

std::string HfConfigJson(const v1::ModelSpec& m) {
  int max_positions = m.seq_len();
  JsonValue original;
  if (!m.hf_config().empty()) {
    if (auto c = ParseHfConfig(m.hf_config()); c.ok()) max_positions = std::max(max_positions, c->max_positions);
    if (auto parsed = memory::ParseJson(m.hf_config()); parsed.ok() && parsed->is_object()) original = *parsed;
  }
  const int ffn = FfnHiddenOf(m);
  JsonWriter w;
  w.BeginObject();
  // Biases on q, k, v only are Qwen2's (a Llama's attention_bias puts one on o_proj too).
  // A sliding window without biases is Mistral's (a LlamaConfig has none).
  const bool mistral = !m.qkv_bias() && m.sliding_window() > 0;
  w.Break("\n  ").Key("architectures").BeginArray().String(m.qkv_bias() ? "Qwen2ForCausalLM" : mistral ? "MistralForCausalLM" : "LlamaForCausalLM").EndArray();
  w.Break("\n  ").Key("model_type").String(m.qkv_bias() ? "qwen2" : mistral ? "mistral" : "llama");
  w.Break("\n  ").Key("hidden_size").Int(m.hidden());
  w.Break("\n  ").Key("intermediate_size").Int(ffn);
  w.Break("\n  ").Key("num_hidden_layers").Int(m.layers());
  w.Break("\n  ").Key("num_attention_heads").Int(m.heads());
  w.Break("\n  ").Key("num_key_value_heads").Int(m.kv_heads() > 0 ? m.kv_heads() : m.heads());
  w.Break("\n  ").Key("head_dim").Int(m.head_dim() > 0 ? m.head_dim() : m.heads() > 0 ? m.hidden() / m.heads() : 0);
  w.Break("\n  ").Key("vocab_size").Int(m.vocab());
  w.Break("\n  ").Key("max_position_embeddings").Int(max_positions);
  w.Break("\n  ").Key("rms_norm_eps").Number(m.rms_norm_eps() != 0 ? m.rms_norm_eps() : 1e-5);
  w.Break("\n  ").Key("rope_theta").Number(m.rope_theta() != 0 ? m.rope_theta() : 10000.0);
  if (m.has_rope_scaling() && m.rope_scaling().factor() > 0) {
    const v1::RopeScaling& r = m.rope_scaling();
    w.Break("\n  ").Key("rope_scaling").BeginObject();
    w.Key("rope_type").String("llama3").Key("factor").Number(r.factor()).Key("low_freq_factor").Number(r.low_freq_factor());
    w.Key("high_freq_factor").Number(r.high_freq_factor()).Key("original_max_position_embeddings").Int(
        r.original_max_position_embeddings());
    w.EndObject();
  } else {
    w.Break("\n  ").Key("rope_scaling").Null();
  }
  w.Break("\n  ").Key("hidden_act").String("silu");
  w.Break("\n  ").Key("tie_word_embeddings").Bool(m.tied_embeddings());
  if (m.qkv_bias()) {
    w.Break("\n  ").Key("use_sliding_window").Bool(m.sliding_window() > 0);
    if (m.sliding_window() > 0) {
      w.Break("\n  ").Key("sliding_window").Int(m.sliding_window());
      w.Break("\n  ").Key("max_window_layers").Int(0);  // every layer
    }
  } else if (mistral) {
    w.Break("\n  ").Key("sliding_window").Int(m.sliding_window());
  } else {
    w.Break("\n  ").Key("attention_bias").Bool(false);
    w.Break("\n  ").Key("mlp_bias").Bool(false);
  }
  w.Break("\n  ").Key("attention_dropout").Number(0);
  w.Break("\n  ").Key("torch_dtype").String("float32");
  std::set<std::string, std::less<>> written;
  for (const auto& [key, v] : original.members) {
    if (InterpretedKeys().count(key) || !written.insert(key).second) continue;
    switch (v.type) {
      case JsonValue::Type::kNull: w.Break("\n  ").Key(key).Null(); break;
      case JsonValue::Type::kBool: w.Break("\n  ").Key(key).Bool(v.boolean); break;
      case JsonValue::Type::kString: w.Break("\n  ").Key(key).String(v.string); break;
      case JsonValue::Type::kNumber:
        if (v.is_integer) {
          w.Break("\n  ").Key(key).Int(v.integer);
        } else {
          w.Break("\n  ").Key(key).Number(v.number);
        }
        break;
      default: break;  // objects and arrays pipecoord does not interpret are left out
    }
  }
  w.Break("\n").EndObject();
  return w.text() + "\n";
}

}  // namespace pipecoord::jobplan
