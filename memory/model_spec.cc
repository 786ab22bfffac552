#include "memory/model_spec.h"

#include <string>

namespace pipecoord::memory {
namespace {

Status Positive(const char* field, int64_t v) {
  if (v < 1) return InvalidArgument(std::string(field) + ": must be >= 1, got " + std::to_string(v));
  return Status::Ok();
}

Status Divides(const char* divisor_name, int64_t divisor, const char* name, int64_t value) {
  if (value % divisor != 0) {
    return InvalidArgument(std::string(divisor_name) + ": must divide " + name + " (" +
                           std::to_string(value) + " % " + std::to_string(divisor) + " != 0)");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateModel(const ModelSpec& m) {
  PIPECOORD_RETURN_IF_ERROR(Positive("layers", m.layers));
  PIPECOORD_RETURN_IF_ERROR(Positive("hidden", m.hidden));
  PIPECOORD_RETURN_IF_ERROR(Positive("ffn", m.ffn));
  PIPECOORD_RETURN_IF_ERROR(Positive("heads", m.heads));
  PIPECOORD_RETURN_IF_ERROR(Positive("kv-heads", m.kv_heads));
  PIPECOORD_RETURN_IF_ERROR(Positive("vocab", m.vocab));
  PIPECOORD_RETURN_IF_ERROR(Positive("seq-len", m.seq_len));
  if (m.learned_positions < 0) return InvalidArgument("learned-positions: must be >= 0");
  if (m.head_dim < 0 || m.head_dim > (int64_t{1} << 16) || m.head_dim % 2 != 0) {
    return InvalidArgument("head-dim: must be 0 (hidden / heads) or an even number <= 65536, got " +
                           std::to_string(m.head_dim));
  }
  // Bounds that keep every byte count well inside 64 bits.
  if (m.layers > 100000) return InvalidArgument("layers: must be <= 100000, got " + std::to_string(m.layers));
  const int64_t kMaxDim = int64_t{1} << 24;
  if (m.hidden > kMaxDim || m.ffn > kMaxDim || m.heads > kMaxDim || m.vocab > (int64_t{1} << 26) ||
      m.seq_len > (int64_t{1} << 24) || m.learned_positions > (int64_t{1} << 24)) {
    return InvalidArgument("model sizes: hidden, ffn, heads, seq-len must be <= 2^24 and vocab <= 2^26");
  }
  const double params = static_cast<double>(m.layers) *
                            (4.0 * m.hidden * m.hidden + 3.0 * m.hidden * m.ffn) +
                        2.0 * m.vocab * m.hidden;
  if (params > 1e15) return InvalidArgument("model sizes: more than 10^15 parameters");
  if (m.head_dim == 0) PIPECOORD_RETURN_IF_ERROR(Divides("heads", m.heads, "hidden", m.hidden));
  PIPECOORD_RETURN_IF_ERROR(Divides("kv-heads", m.kv_heads, "heads", m.heads));
  return Status::Ok();
}

const char* NormName(Norm n) { return n == Norm::kRmsNorm ? "rmsnorm" : "layernorm"; }
const char* MlpName(Mlp m) { return m == Mlp::kSwiGlu ? "swiglu" : "gelu"; }
const char* AttentionName(Attention a) { return a == Attention::kEager ? "eager" : "flash"; }

Result<Norm> ParseNorm(std::string_view t) {
  if (t == "rmsnorm") return Norm::kRmsNorm;
  if (t == "layernorm") return Norm::kLayerNorm;
  return InvalidArgument("norm: expected rmsnorm or layernorm, got \"" + std::string(t) + "\"");
}

Result<Mlp> ParseMlp(std::string_view t) {
  if (t == "swiglu") return Mlp::kSwiGlu;
  if (t == "gelu") return Mlp::kGelu;
  return InvalidArgument("mlp: expected swiglu or gelu, got \"" + std::string(t) + "\"");
}

Result<Attention> ParseAttention(std::string_view t) {
  if (t == "eager") return Attention::kEager;
  if (t == "flash") return Attention::kFlash;
  return InvalidArgument("attention: expected eager or flash, got \"" + std::string(t) + "\"");
}

}  // namespace pipecoord::memory
