#include "cli/model_flags.h"

#include "cli/cli_io.h"
#include "memory/hf_config.h"
#include "memory/presets.h"

namespace pipecoord::cli {
namespace {

std::string PresetNames() {
  std::string s;
  for (const memory::ModelSpec& m : memory::ModelPresets()) s += (s.empty() ? "" : ", ") + m.name;
  return s;
}

}  // namespace

void DeclareModelFlags(FlagSet& f, ModelFlags* m) {
  f.String("model", &m->model, "model preset: " + PresetNames() + " (or give --model-config)");
  f.String("model-config", &m->model_config, "a Hugging Face style config.json to read the model from");
  f.Int("layers", &m->layers, "override: transformer blocks");
  f.Int("seq-len", &m->seq_len, "override: sequence length in tokens (default: the model's context)");
  f.Int("hidden", &m->hidden, "override: hidden size h");
  f.Int("ffn", &m->ffn, "override: MLP intermediate size f");
  f.Int("heads", &m->heads, "override: attention heads a");
  f.Int("kv-heads", &m->kv_heads, "override: key/value heads g (grouped-query attention)");
  f.Int("head-dim", &m->head_dim, "override: features per attention head d when not hidden / heads (0: that)");
  f.Int("vocab", &m->vocab, "override: vocabulary size v");
  f.String("norm", &m->norm, "override: rmsnorm or layernorm");
  f.String("mlp", &m->mlp, "override: swiglu or gelu");
  f.String("attention", &m->attention, "override: eager (keeps the s x s scores) or flash");
  f.Bool("tied-embeddings", &m->tied_embeddings, "override: the LM head shares the embedding (=false to untie)");
  f.Bool("linear-bias", &m->linear_bias, "override: linear layers have biases");
  f.Bool("dropout", &m->dropout, "override: dropout is on (its masks are saved)");
}

Result<memory::ModelSpec> ResolveModel(const FlagSet& f, const ModelFlags& m) {
  memory::ModelSpec spec;
  if (f.Given("model") == f.Given("model-config")) {
    return InvalidArgument("--model: give exactly one of --model (" + PresetNames() + ") and --model-config");
  }
  if (f.Given("model")) {
    auto p = memory::FindModelPreset(m.model);
    if (!p.ok()) return Status(p.status().code(), "--" + p.status().message());
    spec = *p;
  } else {
    auto text = ReadInputFile("--model-config", m.model_config, size_t{16} << 20);
    if (!text.ok()) return text.status();
    auto parsed = memory::ModelFromHfConfig(*text);
    if (!parsed.ok()) return InvalidArgument("--model-config: " + parsed.status().message());
    spec = *parsed;
  }
  auto positive = [&](const char* flag, int v) -> Status {
    if (f.Given(flag) && v < 1) return InvalidArgument(std::string("--") + flag + ": must be >= 1, got " + std::to_string(v));
    return Status::Ok();
  };
  for (auto [flag, v] : {std::pair{"layers", m.layers}, {"seq-len", m.seq_len}, {"hidden", m.hidden}, {"ffn", m.ffn},
                         {"heads", m.heads}, {"kv-heads", m.kv_heads}, {"vocab", m.vocab}}) {
    PIPECOORD_RETURN_IF_ERROR(positive(flag, v));
  }
  if (f.Given("layers")) spec.layers = m.layers;
  if (f.Given("seq-len")) spec.seq_len = m.seq_len;
  if (f.Given("hidden")) spec.hidden = m.hidden;
  if (f.Given("ffn")) spec.ffn = m.ffn;
  if (f.Given("heads")) {
    // Without GQA the key/value heads follow the heads unless given too.
    if (spec.kv_heads == spec.heads && !f.Given("kv-heads")) spec.kv_heads = m.heads;
    spec.heads = m.heads;
  }
  if (f.Given("kv-heads")) spec.kv_heads = m.kv_heads;
  if (f.Given("head-dim")) spec.head_dim = m.head_dim;
  if (f.Given("vocab")) spec.vocab = m.vocab;
  if (f.Given("norm")) {
    auto n = memory::ParseNorm(m.norm);
    if (!n.ok()) return InvalidArgument("--" + n.status().message());
    spec.norm = *n;
  }
  if (f.Given("mlp")) {
    auto x = memory::ParseMlp(m.mlp);
    if (!x.ok()) return InvalidArgument("--" + x.status().message());
    spec.mlp = *x;
  }
  if (f.Given("attention")) {
    auto a = memory::ParseAttention(m.attention);
    if (!a.ok()) return InvalidArgument("--" + a.status().message());
    spec.attention = *a;
  }
  if (f.Given("tied-embeddings")) spec.tied_embeddings = m.tied_embeddings;
  if (f.Given("linear-bias")) spec.linear_bias = m.linear_bias;
  if (f.Given("dropout")) spec.dropout = m.dropout;
  if (f.Given("seq-len") && spec.learned_positions > 0 && spec.learned_positions < spec.seq_len) {
    spec.learned_positions = spec.seq_len;
  }
  PIPECOORD_RETURN_IF_ERROR(memory::ValidateModel(spec));
  return spec;
}

}  // namespace pipecoord::cli
