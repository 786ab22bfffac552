#include "memory/activations.h"

#include <algorithm>
#include <string>

#include "memory/formula.h"

namespace pipecoord::memory {
namespace {

bool ConditionKnown(std::string_view c) {
  return c == "attention=eager" || c == "attention=flash" || c == "mlp=swiglu" || c == "mlp=gelu" ||
         c == "norm=rmsnorm" || c == "norm=layernorm" || c == "dropout" || c == "nodropout";
}

bool ConditionTrue(std::string_view c, const ModelSpec& m) {
  if (c == "attention=eager") return m.attention == Attention::kEager;
  if (c == "attention=flash") return m.attention == Attention::kFlash;
  if (c == "mlp=swiglu") return m.mlp == Mlp::kSwiGlu;
  if (c == "mlp=gelu") return m.mlp == Mlp::kGelu;
  if (c == "norm=rmsnorm") return m.norm == Norm::kRmsNorm;
  if (c == "norm=layernorm") return m.norm == Norm::kLayerNorm;
  if (c == "dropout") return m.dropout;
  return !m.dropout;  // nodropout
}

std::string DtypeName(ElemType t, DtypePolicy policy) {
  switch (t) {
    case ElemType::kAct: return DtypePolicyName(policy);
    case ElemType::kFp32: return "fp32";
    case ElemType::kU8: return "u8";
    case ElemType::kI32: return "i32";
  }
  return "?";
}

int64_t ElemBytes(ElemType t, DtypePolicy policy) {
  switch (t) {
    case ElemType::kAct: return ActivationBytes(policy);
    case ElemType::kFp32: return 4;
    case ElemType::kU8: return 1;
    case ElemType::kI32: return 4;
  }
  return 0;
}

// Saturates at 2^62 so absurd sizes stay comparable (and get refused by the caller).
int64_t Sum(const std::vector<ResolvedTensor>& ts, unsigned need_flags = 0) {
  const int64_t kCap = int64_t{1} << 62;
  int64_t total = 0;
  for (const ResolvedTensor& t : ts) {
    if ((t.flags & need_flags) == need_flags) total = std::min(kCap, total + std::min(kCap, t.bytes));
  }
  return total;
}

Result<EdgeActivations> ResolveEdge(const std::vector<RecipeTensor>& stored,
                                    const std::vector<RecipeTensor>& w_grads,
                                    const std::vector<RecipeTensor>& transient,
                                    const ModelSpec& m, const TrainingSpec& t) {
  EdgeActivations e;
  auto s = ResolveTensors(stored, m, t);
  if (!s.ok()) return s.status();
  auto w = ResolveTensors(w_grads, m, t);
  if (!w.ok()) return w.status();
  auto tr = ResolveTensors(transient, m, t);
  if (!tr.ok()) return tr.status();
  e.tensors = std::move(*s);
  e.transient = std::move(*tr);
  e.stored_bytes = Sum(e.tensors);
  e.w_bytes = std::min(Sum(e.tensors, kWeightInput) + Sum(*w), int64_t{1} << 62);
  e.transient_bytes = Sum(e.transient);
  return e;
}

}  // namespace

Result<bool> ConditionsHold(std::string_view when, const ModelSpec& m) {
  bool all = true;
  while (!when.empty()) {
    size_t comma = when.find(',');
    std::string_view c = when.substr(0, comma);
    if (!ConditionKnown(c)) {
      return InvalidArgument("recipe condition \"" + std::string(c) + "\": unknown (known: " +
                             std::string(kKnownConditions) + ")");
    }
    all = all && ConditionTrue(c, m);
    if (comma == std::string_view::npos) break;
    when.remove_prefix(comma + 1);
  }
  return all;
}

Result<std::vector<ResolvedTensor>> ResolveTensors(const std::vector<RecipeTensor>& tensors,
                                                   const ModelSpec& m, const TrainingSpec& t) {
  const ShapeVars vars{m.seq_len, t.micro_batch, m.hidden, m.ffn, m.heads, m.kv_heads, m.vocab, m.HeadDim()};
  std::vector<ResolvedTensor> out;
  for (const RecipeTensor& rt : tensors) {
    auto holds = ConditionsHold(rt.when, m);
    if (!holds.ok()) return InvalidArgument(std::string(rt.name) + ": " + holds.status().message());
    if (!*holds) continue;
    ResolvedTensor r;
    r.name = rt.name;
    r.group = rt.group;
    r.why = rt.why;
    r.dtype = DtypeName(rt.type, t.dtype);
    r.flags = rt.flags;
    int64_t bytes = ElemBytes(rt.type, t.dtype);
    for (size_t d = 0; d < rt.shape.size() && rt.shape[d] != nullptr; ++d) {
      auto dim = EvalFormula(rt.shape[d], vars);
      if (!dim.ok()) return InvalidArgument(std::string(rt.name) + ": " + dim.status().message());
      int64_t n = *dim;
      if (n < 0) return InvalidArgument(std::string(rt.name) + ": dimension " + std::to_string(d) + " is negative");
      if (rt.tp_dim == static_cast<int>(d)) {
        n = (n + t.tp - 1) / t.tp;
      } else if (rt.tp_dim == kSeqSplit && d == 0 && t.sp) {
        if (n % t.tp != 0) {
          return InvalidArgument(std::string(rt.name) + ": sequence parallelism needs tp to divide its first dimension (" +
                                 std::to_string(n) + " % " + std::to_string(t.tp) + " != 0)");
        }
        n /= t.tp;
      }
      r.shape.push_back(n);
      if (__builtin_mul_overflow(bytes, n, &bytes)) {
        return InvalidArgument(std::string(rt.name) + ": size overflows 64-bit integers");
      }
    }
    if (rt.tp_dim >= static_cast<int>(r.shape.size())) {
      return InvalidArgument(std::string(rt.name) + ": tp_dim " + std::to_string(rt.tp_dim) +
                             " is not a dimension of its shape");
    }
    r.bytes = bytes;
    out.push_back(std::move(r));
  }
  return out;
}

Result<ActivationModel> ResolveActivations(const ModelSpec& m, const TrainingSpec& t) {
  auto recipe = FindRecipe(t.recipe);
  if (!recipe.ok()) return recipe.status();
  const Recipe& r = **recipe;
  ActivationModel am;
  am.recipe = &r;
  BlockActivations& blk = am.block;
  auto saved = ResolveTensors(r.layer, m, t);
  if (!saved.ok()) return saved.status();
  auto w_grads = ResolveTensors(r.w_grads, m, t);
  if (!w_grads.ok()) return w_grads.status();
  blk.saved = std::move(*saved);
  blk.w_grads = std::move(*w_grads);
  blk.saved_bytes = Sum(blk.saved);
  blk.w_bytes = std::min(Sum(blk.saved, kWeightInput) + Sum(blk.w_grads), int64_t{1} << 62);
  switch (t.recompute) {
    case Recompute::kNone:
      blk.kept = blk.saved;
      break;
    case Recompute::kSelective:
      for (const ResolvedTensor& x : blk.saved) {
        if (x.flags & kSelective) blk.recompute_bytes += x.bytes;
        else blk.kept.push_back(x);
      }
      break;
    case Recompute::kFull: {
      auto kept = ResolveTensors(r.full_recompute, m, t);
      if (!kept.ok()) return kept.status();
      blk.kept = std::move(*kept);
      blk.recompute_bytes = blk.saved_bytes;
      break;
    }
  }
  blk.stored_bytes = Sum(blk.kept);
  auto first = ResolveEdge(r.first_stage, r.first_stage_w_grads, {}, m, t);
  if (!first.ok()) return first.status();
  auto last = ResolveEdge(r.last_stage, r.last_stage_w_grads, r.last_stage_transient, m, t);
  if (!last.ok()) return last.status();
  am.first = std::move(*first);
  am.last = std::move(*last);
  return am;
}

}  // namespace pipecoord::memory
