#include "worker/model/model_config.h"

#include <cmath>
#include <string>
#include <utility>

namespace pipecoord::model {
namespace {

Status Positive(const char* field, int64_t value) {
  if (value > 0) return Status::Ok();
  return InvalidArgument(std::string(field) + ": must be > 0, got " + std::to_string(value));
}

}  // namespace

int ModelConfig::FfnHidden() const {
  if (ffn_hidden > 0) return ffn_hidden;
  const int64_t third = (8 * static_cast<int64_t>(hidden) + 2) / 3;  // ceil(8h / 3)
  return static_cast<int>((third + 63) / 64 * 64);
}

Status ModelConfig::Validate() const {
  PIPECOORD_RETURN_IF_ERROR(Positive("layers", layers));
  PIPECOORD_RETURN_IF_ERROR(Positive("hidden", hidden));
  PIPECOORD_RETURN_IF_ERROR(Positive("heads", heads));
  PIPECOORD_RETURN_IF_ERROR(Positive("vocab", vocab));
  PIPECOORD_RETURN_IF_ERROR(Positive("seq_len", seq_len));
  if (ffn_hidden < 0) {
    return InvalidArgument("ffn_hidden: must be >= 0 (0 picks the default), got " +
                           std::to_string(ffn_hidden));
  }
  if (head_dim < 0) return InvalidArgument("head_dim: must be >= 0 (0: hidden / heads), got " + std::to_string(head_dim));
  if (head_dim == 0 && hidden % heads != 0) {
    return InvalidArgument("hidden: must be a multiple of heads (" + std::to_string(heads) +
                           "), got " + std::to_string(hidden));
  }
  if (kv_heads < 0 || (kv_heads > 0 && heads % kv_heads != 0)) {
    return InvalidArgument("kv_heads: must divide heads (" + std::to_string(heads) + ") or be 0 (heads), got " +
                           std::to_string(kv_heads));
  }
  if (head_dim > 0 && head_dim % 2 != 0) {
    return InvalidArgument("head_dim: must be even for rotary embeddings, got " + std::to_string(head_dim));
  }
  if (HeadDim() % 2 != 0) {
    return InvalidArgument("heads: hidden / heads must be even for rotary embeddings, got " +
                           std::to_string(hidden) + " / " + std::to_string(heads) + " = " +
                           std::to_string(HeadDim()));
  }
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps)) {
    return InvalidArgument("rms_norm_eps: must be a finite number > 0, got " + std::to_string(rms_norm_eps));
  }
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) {
    return InvalidArgument("rope_theta: must be a finite number > 0, got " + std::to_string(rope_theta));
  }
  if (rope_scaling.enabled() && !(rope_scaling.low_freq_factor > 0 && rope_scaling.high_freq_factor > rope_scaling.low_freq_factor &&
                                  rope_scaling.original_max_positions > 0)) {
    return InvalidArgument("rope_scaling: needs 0 < low_freq_factor < high_freq_factor and original_max_positions > 0");
  }
  return Status::Ok();
}

Status BatchShape::Validate() const {
  PIPECOORD_RETURN_IF_ERROR(Positive("micro_batch_size", micro_batch_size));
  return Positive("microbatches", microbatches);
}

Status CheckTensorParallel(const ModelConfig& config, int tp) {
  for (auto [what, value] : {std::pair{"heads", static_cast<int64_t>(config.heads)},
                             {"kv_heads", static_cast<int64_t>(config.KvHeads())}, {"ffn_hidden", config.FfnHidden()},
                             {"vocab", static_cast<int64_t>(config.vocab)}}) {
    if (tp < 1 || value % tp != 0) {
      return InvalidArgument(std::string("tp: ") + std::to_string(tp) + " must divide " + what + " (" +
                             std::to_string(value) + ")");
    }
  }
  return Status::Ok();
}

}  // namespace pipecoord::model
