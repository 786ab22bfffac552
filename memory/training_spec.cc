#include "memory/training_spec.h"

#include <string>

namespace pipecoord::memory {
namespace {

Status InRange(const char* field, int v, int lo, int hi) {
  if (v < lo || v > hi) {
    return InvalidArgument(std::string(field) + ": must be in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "], got " + std::to_string(v));
  }
  return Status::Ok();
}

Status TpDivides(const char* name, int64_t value, int tp) {
  if (value % tp != 0) {
    return InvalidArgument(std::string("tp: must divide ") + name + " (" + std::to_string(value) +
                           " % " + std::to_string(tp) + " != 0)");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateTraining(const ModelSpec& m, const TrainingSpec& t) {
  PIPECOORD_RETURN_IF_ERROR(InRange("micro-batch", t.micro_batch, 1, 1 << 20));
  PIPECOORD_RETURN_IF_ERROR(InRange("microbatches", t.microbatches, 1, 1 << 20));
  PIPECOORD_RETURN_IF_ERROR(InRange("zero", t.zero, 0, 3));
  PIPECOORD_RETURN_IF_ERROR(InRange("dp", t.dp, 1, 1 << 20));
  PIPECOORD_RETURN_IF_ERROR(InRange("tp", t.tp, 1, 4096));
  PIPECOORD_RETURN_IF_ERROR(InRange("pp", t.pp, 1, 4096));
  PIPECOORD_RETURN_IF_ERROR(InRange("vpp", t.vpp, 0, 64));
  PIPECOORD_RETURN_IF_ERROR(TpDivides("heads", m.heads, t.tp));
  PIPECOORD_RETURN_IF_ERROR(TpDivides("kv-heads", m.kv_heads, t.tp));
  PIPECOORD_RETURN_IF_ERROR(TpDivides("ffn", m.ffn, t.tp));
  if (t.sp) PIPECOORD_RETURN_IF_ERROR(TpDivides("seq-len (sequence parallel)", m.seq_len, t.tp));
  const int chunks = t.pp * (t.vpp == 0 ? 1 : t.vpp);
  if (m.layers < chunks) {
    return InvalidArgument("layers: every pipeline chunk needs at least one block, so layers (" +
                           std::to_string(m.layers) + ") must be >= pp x vpp (" +
                           std::to_string(chunks) + ")");
  }
  return Status::Ok();
}

int ActivationBytes(DtypePolicy d) { return d == DtypePolicy::kFp32 ? 4 : 2; }

const char* DtypePolicyName(DtypePolicy d) {
  switch (d) {
    case DtypePolicy::kFp32: return "fp32";
    case DtypePolicy::kBf16: return "bf16";
    case DtypePolicy::kFp16: return "fp16";
  }
  return "?";
}
const char* OptimizerName(Optimizer o) { return o == Optimizer::kAdamW ? "adamw" : "sgd"; }
const char* RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

Result<DtypePolicy> ParseDtypePolicy(std::string_view t) {
  if (t == "fp32") return DtypePolicy::kFp32;
  if (t == "bf16") return DtypePolicy::kBf16;
  if (t == "fp16") return DtypePolicy::kFp16;
  return InvalidArgument("dtype: expected fp32, bf16 or fp16, got \"" + std::string(t) + "\"");
}
Result<Optimizer> ParseOptimizer(std::string_view t) {
  if (t == "adamw" || t == "adam") return Optimizer::kAdamW;
  if (t == "sgd") return Optimizer::kSgd;
  return InvalidArgument("optimizer: expected adamw or sgd, got \"" + std::string(t) + "\"");
}
Result<Recompute> ParseRecompute(std::string_view t) {
  if (t == "none") return Recompute::kNone;
  if (t == "selective") return Recompute::kSelective;
  if (t == "full") return Recompute::kFull;
  return InvalidArgument("recompute: expected none, selective or full, got \"" + std::string(t) + "\"");
}

}  // namespace pipecoord::memory
