// The model options `pipectl memory` and `pipectl plan` share: a preset or a Hugging Face
// config.json, then any field overridden.
#ifndef PIPECOORD_CLI_MODEL_FLAGS_H_
#define PIPECOORD_CLI_MODEL_FLAGS_H_

#include <string>

#include "common/flags.h"
#include "common/status.h"
#include "memory/model_spec.h"

namespace pipecoord::cli {

struct ModelFlags {
  std::string model, model_config, norm, mlp, attention;
  int layers = 0, hidden = 0, ffn = 0, heads = 0, kv_heads = 0, vocab = 0, seq_len = 0, head_dim = 0;
  bool tied_embeddings = false, linear_bias = false, dropout = false;
};

void DeclareModelFlags(FlagSet& flags, ModelFlags* m);

// The preset (--model) or config (--model-config), with every given override applied and the
// result validated. Errors name the flag or the rule: "--model: unknown preset \"x\" (known:
// ...)", "heads: must divide hidden (4096 % 30 != 0)".
Result<memory::ModelSpec> ResolveModel(const FlagSet& flags, const ModelFlags& m);

}  // namespace pipecoord::cli

#endif  // PIPECOORD_CLI_MODEL_FLAGS_H_
