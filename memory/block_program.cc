#include "memory/block_program.h"

#include <initializer_list>
#include <map>
#include <string>

namespace pipecoord::memory {
namespace {

using Shape = std::vector<int64_t>;

class Builder {
 public:
  void Begin(const std::string& name) {
    set_.programs.push_back({name, {}});
  }

  // Declares a tensor (idempotent for weights and other inputs of the set).
  void Declare(const std::string& id, Shape shape, const std::string& dtype, bool persistable = false) {
    TensorRef t;
    t.id = id;
    t.shape = std::move(shape);
    t.shape_given = true;
    t.dtype = dtype;
    t.persistable = persistable;
    decl_[id] = t;
  }

  // An op reading `ins` and producing `outs` (each declared before, or with Declare below).
  void Op(const std::string& name, std::initializer_list<std::string> ins,
          std::initializer_list<std::string> outs, const std::string& inplace_of = "") {
    ProgramOp op;
    op.name = name;
    for (const std::string& id : ins) op.inputs.push_back(decl_.at(id));
    for (const std::string& id : outs) {
      TensorRef t = decl_.at(id);
      if (!inplace_of.empty()) {
        t.inplace = true;
        t.inplace_of = inplace_of;
      }
      op.outputs.push_back(t);
    }
    set_.programs.back().ops.push_back(std::move(op));
  }

  ProgramSet Take() { return std::move(set_); }
  ProgramSet& set() { return set_; }

 private:
  ProgramSet set_;
  std::map<std::string, TensorRef> decl_;
};

struct Dims {
  int64_t s, b, h, f, t, heads, kv_width, qkv_width, fc1_width;
  bool sp;     // sequence parallel: outside the TP regions tensors hold s/t of the sequence
  int64_t sq;  // the sequence length of those tensors: s / t with sp, else s
};

// Where a TP region begins: its input, a sequence shard under SP, is all-gathered into a
// transient full-sequence tensor `gathered`; without SP the input is used as it is.
std::string EnterTpRegion(Builder& B, const Dims& d, const std::string& input, const std::string& gathered,
                          const std::string& dtype) {
  if (!d.sp) return input;
  B.Declare(gathered, {d.s, d.b, d.h}, dtype);
  B.Op("all_gather", {input}, {gathered});
  return gathered;
}

// Where a TP region ends: the partial sums are all-reduced in place (no SP) or, under SP,
// written as a full-sequence partial `partial` and reduce-scattered into the shard `out`.
// Returns the id the region's op must write.
std::string LeaveTpRegionTarget(Builder& B, const Dims& d, const std::string& out, const std::string& partial,
                                const std::string& dtype) {
  if (!d.sp) return out;
  B.Declare(partial, {d.s, d.b, d.h}, dtype);
  return partial;
}
void LeaveTpRegion(Builder& B, const Dims& d, const std::string& out, const std::string& partial) {
  if (d.sp) B.Op("reduce_scatter", {partial}, {out});
  else if (d.t > 1) B.Op("all_reduce", {out}, {out}, out);
}

// The forward ops. `p` prefixes every id the ops produce (the recompute program uses "r.");
// `attention_core_only` emits just the s x s part of eager attention (selective recompute).
void Forward(Builder& B, const ModelSpec& m, const Dims& d, const std::string& act,
             const std::string& p, bool attention_core_only) {
  // sbh: the tensors outside the TP regions (a sequence shard under SP).
  const Shape sbh{d.sq, d.b, d.h}, sbh_t{d.s, d.b, d.h / d.t};
  const bool eager = m.attention == Attention::kEager;
  const bool dropout = m.dropout;
  const bool layernorm = m.norm == Norm::kLayerNorm;
  const Shape stats{d.sq, d.b, layernorm ? 2 : 1};
  auto D = [&](const std::string& id, Shape shape, const std::string& dtype) { B.Declare(p + id, std::move(shape), dtype); };
  const std::string x = "input_norm.input";
  if (!attention_core_only) {
    D("attention.qkv_input", sbh, act);
    D("input_norm.stats", stats, "fp32");
    B.Op("input_norm", {x, "w.input_norm"}, {p + "attention.qkv_input", p + "input_norm.stats"});
    D("attention.qkv", {d.s, d.b, d.qkv_width}, act);
    const std::string qkv_in = EnterTpRegion(B, d, p + "attention.qkv_input", p + "attention.qkv_input_gathered", act);
    B.Op("qkv_proj", {qkv_in, "w.qkv"}, {p + "attention.qkv"});
    D("attention.q", sbh_t, act);
    if (eager && d.kv_width != d.h / d.t) {
      D("attention.k_groups", {d.s, d.b, d.kv_width}, act);
      D("attention.v_groups", {d.s, d.b, d.kv_width}, act);
      B.Op("split_qkv", {p + "attention.qkv"}, {p + "attention.q", p + "attention.k_groups", p + "attention.v_groups"});
      D("attention.k", sbh_t, act);
      D("attention.v", sbh_t, act);
      B.Op("repeat_kv", {p + "attention.k_groups", p + "attention.v_groups"}, {p + "attention.k", p + "attention.v"});
    } else {
      D("attention.k", {d.s, d.b, eager ? d.h / d.t : d.kv_width}, act);
      D("attention.v", {d.s, d.b, eager ? d.h / d.t : d.kv_width}, act);
      B.Op("split_qkv", {p + "attention.qkv"}, {p + "attention.q", p + "attention.k", p + "attention.v"});
    }
  }
  // Inputs of the core come from the forward program when only the core is recomputed.
  const std::string c = attention_core_only ? "" : p;
  if (eager) {
    const Shape ss{d.b, d.heads, d.s, d.s};
    D("attention.scores", ss, act);
    B.Op("qk_matmul", {c + "attention.q", c + "attention.k"}, {p + "attention.scores"});
    D("attention.softmax_output", ss, act);
    B.Op("softmax", {p + "attention.scores"}, {p + "attention.softmax_output"});
    std::string probs = p + "attention.softmax_output";
    if (dropout) {
      D("attention.softmax_dropout_mask", ss, "u8");
      D("attention.softmax_dropout_output", ss, act);
      B.Op("attention_dropout", {probs}, {p + "attention.softmax_dropout_mask", p + "attention.softmax_dropout_output"});
      probs = p + "attention.softmax_dropout_output";
    }
    if (attention_core_only) return;  // the context is not needed by backward again
    D("attention.context", sbh_t, act);
    B.Op("pv_matmul", {probs, p + "attention.v"}, {p + "attention.context"});
    D("attention.proj_input", sbh_t, act);
    B.Op("merge_heads", {p + "attention.context"}, {p + "attention.proj_input"});
  } else {
    if (attention_core_only) return;
    D("attention.flash_output", sbh_t, act);
    D("attention.flash_lse", {d.b, d.heads, d.s}, "fp32");
    B.Op("flash_attention", {p + "attention.q", p + "attention.k", p + "attention.v"},
         {p + "attention.flash_output", p + "attention.flash_lse"});
    D("attention.proj_input", sbh_t, act);
    B.Op("merge_heads", {p + "attention.flash_output"}, {p + "attention.proj_input"});
  }
  D("attention.output", sbh, act);
  const std::string proj_out = LeaveTpRegionTarget(B, d, p + "attention.output", p + "attention.output_partial", act);
  B.Op("out_proj", {p + "attention.proj_input", "w.proj"}, {proj_out});
  LeaveTpRegion(B, d, p + "attention.output", proj_out);
  D("post_attention_norm.input", sbh, act);
  if (dropout) {
    D("attention.dropout_mask", sbh, "u8");
    B.Op("bias_dropout_add", {p + "attention.output", x}, {p + "attention.dropout_mask", p + "post_attention_norm.input"});
  } else {
    B.Op("residual_add", {p + "attention.output", x}, {p + "post_attention_norm.input"});
  }
  D("mlp.fc1_input", sbh, act);
  D("post_attention_norm.stats", stats, "fp32");
  B.Op("post_attention_norm", {p + "post_attention_norm.input", "w.post_attention_norm"},
       {p + "mlp.fc1_input", p + "post_attention_norm.stats"});
  const Shape sbf_t{d.s, d.b, d.f / d.t};
  const std::string fc1_in = EnterTpRegion(B, d, p + "mlp.fc1_input", p + "mlp.fc1_input_gathered", act);
  if (m.mlp == Mlp::kSwiGlu) {
    D("mlp.fc1_output", {d.s, d.b, d.fc1_width}, act);
    B.Op("fc1", {fc1_in, "w.fc1"}, {p + "mlp.fc1_output"});
    D("mlp.silu_output", sbf_t, act);
    B.Op("silu", {p + "mlp.fc1_output"}, {p + "mlp.silu_output"});
    D("mlp.fc2_input", sbf_t, act);
    B.Op("gate_mul", {p + "mlp.silu_output", p + "mlp.fc1_output"}, {p + "mlp.fc2_input"});
  } else {
    D("mlp.gelu_input", sbf_t, act);
    B.Op("fc1", {fc1_in, "w.fc1"}, {p + "mlp.gelu_input"});
    D("mlp.fc2_input", sbf_t, act);
    B.Op("gelu", {p + "mlp.gelu_input"}, {p + "mlp.fc2_input"});
  }
  D("mlp.output", sbh, act);
  const std::string fc2_out = LeaveTpRegionTarget(B, d, p + "mlp.output", p + "mlp.output_partial", act);
  B.Op("fc2", {p + "mlp.fc2_input", "w.fc2"}, {fc2_out});
  LeaveTpRegion(B, d, p + "mlp.output", fc2_out);
  D("block.output", sbh, act);
  if (dropout) {
    D("mlp.dropout_mask", sbh, "u8");
    B.Op("bias_dropout_add", {p + "mlp.output", p + "post_attention_norm.input"},
         {p + "mlp.dropout_mask", p + "block.output"});
  } else {
    B.Op("residual_add", {p + "mlp.output", p + "post_attention_norm.input"}, {p + "block.output"});
  }
}

}  // namespace

int64_t BlockBoundaryBytes(const ModelSpec& m, const TrainingSpec& t) {
  const int64_t shards = t.sp && t.tp > 1 ? t.tp : 1;
  return m.seq_len / shards * t.micro_batch * m.hidden * ActivationBytes(t.dtype);
}

Result<ProgramSet> TransformerBlockProgram(const ModelSpec& m, const TrainingSpec& t) {
  PIPECOORD_RETURN_IF_ERROR(ValidateModel(m));
  PIPECOORD_RETURN_IF_ERROR(ValidateTraining(m, t));
  if (m.QWidth() != m.hidden) {
    return InvalidArgument("head-dim: the block program models q and o hidden wide (head_dim = hidden / heads), got " +
                           std::to_string(m.head_dim) + " x " + std::to_string(m.heads) + " heads");
  }
  if (t.sp && m.seq_len % t.tp != 0) {
    return InvalidArgument("sequence parallelism needs tp to divide seq_len (" + std::to_string(m.seq_len) + " % " +
                           std::to_string(t.tp) + " != 0)");
  }
  const std::string act = DtypePolicyName(t.dtype);
  const std::string grad = (t.dtype == DtypePolicy::kFp32 || t.fp32_grads) ? "fp32" : act;
  Dims d;
  d.s = m.seq_len;
  d.b = t.micro_batch;
  d.h = m.hidden;
  d.f = m.ffn;
  d.t = t.tp;
  d.heads = m.heads / t.tp;
  d.kv_width = m.kv_heads * (m.hidden / m.heads) / t.tp;
  d.qkv_width = d.h / d.t + 2 * d.kv_width;
  d.fc1_width = (m.mlp == Mlp::kSwiGlu ? 2 * d.f : d.f) / d.t;
  d.sp = t.sp && t.tp > 1;
  d.sq = d.sp ? d.s / d.t : d.s;
  const Shape sbh{d.sq, d.b, d.h}, sbh_t{d.s, d.b, d.h / d.t};
  const int64_t norm_params = m.norm == Norm::kLayerNorm ? 2 * d.h : d.h;

  Builder B;
  B.Declare("input_norm.input", sbh, act);
  B.Declare("w.input_norm", {norm_params}, act, true);
  B.Declare("w.post_attention_norm", {norm_params}, act, true);
  B.Declare("w.qkv", {d.qkv_width, d.h}, act, true);
  B.Declare("w.proj", {d.h, d.h / d.t}, act, true);
  B.Declare("w.fc1", {d.fc1_width, d.h}, act, true);
  B.Declare("w.fc2", {d.h, d.f / d.t}, act, true);
  B.Declare("main_grad.input_norm", {norm_params}, grad, true);
  B.Declare("main_grad.post_attention_norm", {norm_params}, grad, true);
  B.Declare("main_grad.qkv", {d.qkv_width, d.h}, grad, true);
  B.Declare("main_grad.proj", {d.h, d.h / d.t}, grad, true);
  B.Declare("main_grad.fc1", {d.fc1_width, d.h}, grad, true);
  B.Declare("main_grad.fc2", {d.h, d.f / d.t}, grad, true);

  B.Begin("forward");
  Forward(B, m, d, act, "", false);
  B.set().keep.push_back("block.output");

  // What backward reads: the forward's tensors, or their recomputed twins.
  std::string r, rc;  // prefix for the block's tensors, for the attention core's
  if (t.recompute == Recompute::kFull) {
    B.Begin("recompute");
    Forward(B, m, d, act, "r.", false);
    r = rc = "r.";
  } else if (t.recompute == Recompute::kSelective && m.attention == Attention::kEager) {
    B.Begin("recompute");
    Forward(B, m, d, act, "r.", true);
    rc = "r.";
  }
  const bool eager = m.attention == Attention::kEager;
  const bool dropout = m.dropout;
  const Shape sbf_t{d.s, d.b, d.f / d.t};

  B.Begin("backward_input");
  B.Declare("grad.block_output", sbh, act);
  std::string dy = "grad.block_output";
  B.Declare("grad.fc2_output", sbh, act);
  if (dropout) B.Op("dropout_add_backward", {dy, r + "mlp.dropout_mask"}, {"grad.fc2_output"});
  else B.Op("residual_backward", {dy}, {"grad.fc2_output"});
  B.Declare("grad.fc2_input", sbf_t, act);
  B.Op("fc2_dgrad", {EnterTpRegion(B, d, "grad.fc2_output", "grad.fc2_output_gathered", act), "w.fc2"},
       {"grad.fc2_input"});
  B.Declare("grad.fc1_output", {d.s, d.b, d.fc1_width}, act);
  if (m.mlp == Mlp::kSwiGlu) {
    B.Op("swiglu_backward", {"grad.fc2_input", r + "mlp.fc1_output", r + "mlp.silu_output"}, {"grad.fc1_output"});
  } else {
    B.Op("gelu_backward", {"grad.fc2_input", r + "mlp.gelu_input"}, {"grad.fc1_output"});
  }
  B.Declare("grad.fc1_input", sbh, act);
  const std::string fc1_dx = LeaveTpRegionTarget(B, d, "grad.fc1_input", "grad.fc1_input_partial", act);
  B.Op("fc1_dgrad", {"grad.fc1_output", "w.fc1"}, {fc1_dx});
  LeaveTpRegion(B, d, "grad.fc1_input", fc1_dx);
  B.Declare("grad.post_attention_norm_input", sbh, act);
  B.Op("post_attention_norm_backward",
       {"grad.fc1_input", r + "post_attention_norm.input", r + "post_attention_norm.stats",
        "w.post_attention_norm", "main_grad.post_attention_norm"},
       {"grad.post_attention_norm_input", "main_grad.post_attention_norm"});
  B.Declare("grad.residual", sbh, act);
  B.Op("residual_grad_add", {"grad.post_attention_norm_input", dy}, {"grad.residual"});
  B.Declare("grad.proj_output", sbh, act);
  if (dropout) B.Op("dropout_add_backward", {"grad.residual", r + "attention.dropout_mask"}, {"grad.proj_output"});
  else B.Op("residual_backward", {"grad.residual"}, {"grad.proj_output"});
  B.Declare("grad.proj_input", sbh_t, act);
  B.Op("out_proj_dgrad", {EnterTpRegion(B, d, "grad.proj_output", "grad.proj_output_gathered", act), "w.proj"},
       {"grad.proj_input"});
  B.Declare("grad.context", sbh_t, act);
  B.Op("merge_heads_backward", {"grad.proj_input"}, {"grad.context"});
  const Shape kv_shape{d.s, d.b, eager ? d.h / d.t : d.kv_width};
  B.Declare("grad.q", sbh_t, act);
  B.Declare("grad.k", kv_shape, act);
  B.Declare("grad.v", kv_shape, act);
  if (eager) {
    const Shape ss{d.b, d.heads, d.s, d.s};
    const std::string probs = rc + (dropout ? "attention.softmax_dropout_output" : "attention.softmax_output");
    B.Declare("grad.probs", ss, act);
    B.Op("pv_matmul_backward", {"grad.context", probs, r + "attention.v"}, {"grad.probs", "grad.v"});
    std::string dp = "grad.probs";
    if (dropout) {
      B.Declare("grad.softmax_output", ss, act);
      B.Op("attention_dropout_backward", {dp, rc + "attention.softmax_dropout_mask"}, {"grad.softmax_output"});
      dp = "grad.softmax_output";
    }
    B.Declare("grad.scores", ss, act);
    B.Op("softmax_backward", {dp, rc + "attention.softmax_output"}, {"grad.scores"});
    B.Op("qk_matmul_backward", {"grad.scores", r + "attention.q", r + "attention.k"}, {"grad.q", "grad.k"});
  } else {
    B.Op("flash_attention_backward",
         {"grad.context", r + "attention.q", r + "attention.k", r + "attention.v", r + "attention.flash_output",
          r + "attention.flash_lse"},
         {"grad.q", "grad.k", "grad.v"});
  }
  B.Declare("grad.qkv_output", {d.s, d.b, d.qkv_width}, act);
  if (eager && d.kv_width != d.h / d.t) {
    B.Declare("grad.k_groups", {d.s, d.b, d.kv_width}, act);
    B.Declare("grad.v_groups", {d.s, d.b, d.kv_width}, act);
    B.Op("repeat_kv_backward", {"grad.k", "grad.v"}, {"grad.k_groups", "grad.v_groups"});
    B.Op("merge_qkv_grads", {"grad.q", "grad.k_groups", "grad.v_groups"}, {"grad.qkv_output"});
  } else {
    B.Op("merge_qkv_grads", {"grad.q", "grad.k", "grad.v"}, {"grad.qkv_output"});
  }
  B.Declare("grad.qkv_input", sbh, act);
  const std::string qkv_dx = LeaveTpRegionTarget(B, d, "grad.qkv_input", "grad.qkv_input_partial", act);
  B.Op("qkv_dgrad", {"grad.qkv_output", "w.qkv"}, {qkv_dx});
  LeaveTpRegion(B, d, "grad.qkv_input", qkv_dx);
  B.Declare("grad.input_norm_input", sbh, act);
  B.Op("input_norm_backward",
       {"grad.qkv_input", "input_norm.input", r + "input_norm.stats", "w.input_norm", "main_grad.input_norm"},
       {"grad.input_norm_input", "main_grad.input_norm"});
  B.Declare("grad.block_input", sbh, act);
  B.Op("residual_grad_add", {"grad.input_norm_input", "grad.residual"}, {"grad.block_input"});
  B.set().keep.push_back("grad.block_input");

  // Under SP, W gathers the sequence shards kept for it again, one at a time (as B did).
  B.Begin("backward_weight");
  B.Op("qkv_wgrad",
       {EnterTpRegion(B, d, r + "attention.qkv_input", "wgrad.qkv_input_gathered", act), "grad.qkv_output", "main_grad.qkv"},
       {"main_grad.qkv"}, "main_grad.qkv");
  B.Op("out_proj_wgrad",
       {r + "attention.proj_input", EnterTpRegion(B, d, "grad.proj_output", "wgrad.proj_output_gathered", act),
        "main_grad.proj"},
       {"main_grad.proj"}, "main_grad.proj");
  B.Op("fc1_wgrad", {EnterTpRegion(B, d, r + "mlp.fc1_input", "wgrad.fc1_input_gathered", act), "grad.fc1_output", "main_grad.fc1"},
       {"main_grad.fc1"}, "main_grad.fc1");
  B.Op("fc2_wgrad",
       {r + "mlp.fc2_input", EnterTpRegion(B, d, "grad.fc2_output", "wgrad.fc2_output_gathered", act), "main_grad.fc2"},
       {"main_grad.fc2"}, "main_grad.fc2");
  return B.Take();
}

}  // namespace pipecoord::memory
