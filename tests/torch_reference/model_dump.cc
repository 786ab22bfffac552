// model_dump: runs our C++ model (worker/model/) and writes what it computed to a safetensors
// file, for the PyTorch reference (python/pipecoord/reference_model.py) to recompute
// independently. Two modes:
//
//   model_dump microbatch --out F [shape flags] [--steps N --lr X --weight-decay X]
//     One StageModel holding the whole model. Writes the initial weights ("init/<name>"), the
//     first micro-batch's tokens and targets ("data/0/0/inputs", ".../targets"), its logits
//     ("logits" [b*s, vocab]), loss ("loss" F64 [1]) and every parameter's gradient
//     ("grad/<name>"); then N AdamW steps with weight decay, one micro-batch each (data/<step>/0),
//     the weights after each ("step/<t>/<name>", t = 1..N) and after them all ("trained/<name>"),
//     and the step losses ("losses" F64 [N]).
//
//   model_dump pipelined --out F --schedule S --pp P [--vpp V] --microbatches M [shape flags]
//     The job run pipelined in one process (worker/daemon/local_run.h: one thread and executor
//     per rank, TCP on loopback) for --steps steps. Writes the initial weights, every micro-batch
//     of every step ("data/<step>/<mb>/inputs", ".../targets"), the step losses ("losses") and
//     each parameter's weights and AdamW moments after the last step, gathered from the rank
//     that holds it ("final/<name>", "final_adam_m/<name>", "final_adam_v/<name>"; with --tp
//     the slices joined, with --zero the replicas' moment shards put together), each step's
//     global gradient norm and learning rate ("grad_norms", "learning_rates"). --tp, --dp, --zero
//     and --optimizer (spec.optimizer: betas, eps, weight decay, schedule, clipping) shape the job.
//
// Metadata records the shape and optimizer settings the reader needs.
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/flags.h"
#include "data/safetensors_file.h"
#include "kernels/cpu/adamw.h"
#include "common/rank_layout.h"
#include "jobplan/layout.h"
#include "worker/daemon/local_run.h"
#include "worker/model/model_config.h"
#include "worker/model/stage_model.h"
#include "worker/model/stage_shard.h"
#include "worker/model/synthetic_data.h"
#include "worker/model/weight_init.h"

namespace pipecoord {
namespace {

struct Options {
  std::string out;
  int layers = 2, hidden = 32, heads = 4, vocab = 64, seq = 16, batch = 2, ffn = 0, kv_heads = 0;
  bool qkv_bias = false;
  int sliding_window = 0;
  int seed = 7, steps = 3;
  double lr = 0.01, weight_decay = 0.1;
  std::string schedule = "1f1b";
  int pp = 2, vpp = 0, microbatches = 4;
  std::vector<int> stage_layers;
  // pipelined: the layout beyond pp, and spec.optimizer (with --optimizer; --weight-decay then too)
  int tp = 1, dp = 1, zero = 0;
  bool sp = false;
  std::string recompute;
  bool optimizer = false;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, min_lr = 0, clip = 0;
  std::string lr_schedule = "constant";
  int warmup = 0, decay_steps = 0;
};

// Tensors to write; owns their bytes until written.
class Dump {
 public:
  void F32(const std::string& name, std::vector<uint64_t> shape, std::span<const float> v) {
    Add(name, data::SafetensorsDtype::kF32, std::move(shape), v.data(), v.size() * sizeof(float));
  }
  void F64(const std::string& name, const std::vector<double>& v) {
    Add(name, data::SafetensorsDtype::kF64, {v.size()}, v.data(), v.size() * sizeof(double));
  }
  void I32(const std::string& name, std::vector<uint64_t> shape, const std::vector<int32_t>& v) {
    Add(name, data::SafetensorsDtype::kI32, std::move(shape), v.data(), v.size() * sizeof(int32_t));
  }
  void Meta(const std::string& key, const std::string& value) { meta_.emplace_back(key, value); }

  Status Write(const std::string& path) {
    std::vector<data::TensorToWrite> tensors;
    for (size_t i = 0; i < names_.size(); ++i) {
      tensors.push_back({names_[i], dtypes_[i], shapes_[i],
                         std::span<const uint8_t>(bytes_[i].data(), bytes_[i].size())});
    }
    return data::WriteSafetensorsFile(path, tensors, meta_);
  }

 private:
  void Add(const std::string& name, data::SafetensorsDtype dtype, std::vector<uint64_t> shape,
           const void* p, size_t n) {
    names_.push_back(name);
    dtypes_.push_back(dtype);
    shapes_.push_back(std::move(shape));
    bytes_.emplace_back(n);
    if (n > 0) std::memcpy(bytes_.back().data(), p, n);
  }
  std::vector<std::string> names_;
  std::vector<data::SafetensorsDtype> dtypes_;
  std::vector<std::vector<uint64_t>> shapes_;
  std::vector<std::vector<uint8_t>> bytes_;
  std::vector<std::pair<std::string, std::string>> meta_;
};

model::ModelConfig Config(const Options& o) {
  model::ModelConfig c;
  c.layers = o.layers;
  c.hidden = o.hidden;
  c.heads = o.heads;
  c.kv_heads = o.kv_heads;
  c.qkv_bias = o.qkv_bias;
  c.sliding_window = o.sliding_window;
  c.vocab = o.vocab;
  c.seq_len = o.seq;
  c.ffn_hidden = o.ffn;
  c.seed = static_cast<uint64_t>(o.seed);
  return c;
}

void ShapeMeta(const Options& o, Dump* dump) {
  dump->Meta("layers", std::to_string(o.layers));
  dump->Meta("hidden", std::to_string(o.hidden));
  dump->Meta("heads", std::to_string(o.heads));
  dump->Meta("kv_heads", std::to_string(Config(o).KvHeads()));
  dump->Meta("qkv_bias", o.qkv_bias ? "1" : "0");
  dump->Meta("sliding_window", std::to_string(o.sliding_window));
  dump->Meta("vocab", std::to_string(o.vocab));
  dump->Meta("seq_len", std::to_string(o.seq));
  dump->Meta("ffn_hidden", std::to_string(Config(o).FfnHidden()));
  dump->Meta("micro_batch_size", std::to_string(o.batch));
  dump->Meta("steps", std::to_string(o.steps));
  char lr[64];
  std::snprintf(lr, sizeof lr, "%.17g", o.lr);
  dump->Meta("lr", lr);
}

std::vector<uint64_t> Shape(std::span<const int64_t> s) { return {s.begin(), s.end()}; }

void Weights(const std::string& prefix, model::StageModel& m, Dump* dump) {
  for (const model::ParameterRef& p : m.Parameters()) {
    dump->F32(prefix + std::string(p.name), Shape(p.shape), p.value);
  }
}

void Batch(const Options& o, int step, int mb, const model::TokenBatch& b, Dump* dump) {
  const std::string key = "data/" + std::to_string(step) + "/" + std::to_string(mb) + "/";
  const std::vector<uint64_t> shape = {static_cast<uint64_t>(o.batch), static_cast<uint64_t>(o.seq)};
  dump->I32(key + "inputs", shape, b.inputs);
  dump->I32(key + "targets", shape, b.targets);
}

Status MicroBatch(const Options& o, Dump* dump) {
  const model::ModelConfig config = Config(o);
  const model::BatchShape batch{o.batch, 1};
  auto created = model::StageModel::Create(config, model::WholeModel(config), batch);
  if (!created.ok()) return created.status();
  model::StageModel& m = **created;
  Weights("init/", m, dump);
  model::SyntheticData data(config.seed, o.vocab, o.seq, o.batch);
  const model::TokenBatch first = data.Batch(0, 0);

  // The logits: the same weights (a pure function of seed and name) in a stage without the head,
  // then the head's forward on its output with the whole model's norm and output weights.
  model::StageShard body = model::WholeModel(config);
  body.has_head = false;
  auto trunk = model::StageModel::Create(config, body, batch);
  if (!trunk.ok()) return trunk.status();
  model::StageInput in;
  in.tokens = kernels::ToHostBuffer(first.inputs);
  auto x = (*trunk)->Forward(0, std::move(in));
  if (!x.ok()) return x.status();
  auto norm = m.FindParameter("norm.weight");
  auto output = m.FindParameter("output.weight");
  if (!norm.ok()) return norm.status();
  if (!output.ok()) return output.status();
  const int64_t tokens = static_cast<int64_t>(o.batch) * o.seq;
  std::vector<float> unused_norm_grad(o.hidden), unused_out_grad(output->value.size());
  model::HeadDims head_dims;
  head_dims.tokens = tokens;
  head_dims.hidden = o.hidden;
  head_dims.vocab = o.vocab;
  model::LmHead<float> head(head_dims, {norm->value.data(), output->value.data()},
                            {unused_norm_grad.data(), unused_out_grad.data()});
  model::HeadSaved<float> saved;
  head.Forward(std::move(x->activations), first.targets, &saved);
  dump->F32("logits", {static_cast<uint64_t>(tokens), static_cast<uint64_t>(o.vocab)}, saved.logits);

  kernels::cpu::AdamWOptions adamw;
  adamw.lr = o.lr;
  adamw.weight_decay = o.weight_decay;
  std::vector<double> losses;
  for (int step = 0; step < o.steps; ++step) {
    const model::TokenBatch b = data.Batch(step, 0);
    Batch(o, step, 0, b, dump);
    model::StageInput input;
    input.tokens = kernels::ToHostBuffer(b.inputs);
    input.targets = kernels::ToHostBuffer(b.targets);
    auto out = m.Forward(0, std::move(input));
    if (!out.ok()) return out.status();
    losses.push_back(*out->loss);
    auto dx = m.BackwardFull(0, {});
    if (!dx.ok()) return dx.status();
    if (step == 0) {
      dump->F64("loss", {*out->loss});
      for (const model::ParameterRef& p : m.Parameters()) {
        dump->F32("grad/" + std::string(p.name), Shape(p.shape), p.grad);
      }
    }
    PIPECOORD_RETURN_IF_ERROR(m.OptimizerStep(adamw));
    m.ZeroGrad();
    Weights("step/" + std::to_string(step + 1) + "/", m, dump);
  }
  dump->F64("losses", losses);
  Weights("trained/", m, dump);
  char wd[64];
  std::snprintf(wd, sizeof wd, "%.17g", o.weight_decay);
  dump->Meta("weight_decay", wd);
  dump->Meta("microbatches", "1");
  return Status::Ok();
}

Status Pipelined(const Options& o, Dump* dump) {
  v1::JobSpec spec;
  spec.set_name("torch-reference");
  spec.set_schedule(o.schedule);
  spec.set_pp(o.pp);
  spec.set_vpp(o.vpp);
  spec.set_microbatches(o.microbatches);
  spec.set_micro_batch_size(o.batch);
  spec.set_steps(o.steps);
  spec.set_learning_rate(o.lr);
  spec.set_tp(o.tp);
  spec.set_dp(o.dp);
  spec.set_zero(o.zero);
  spec.set_sequence_parallel(o.sp);
  if (!o.recompute.empty()) spec.set_recompute(o.recompute);
  if (o.optimizer) {
    v1::OptimizerSpec* opt = spec.mutable_optimizer();
    opt->set_beta1(o.beta1);
    opt->set_beta2(o.beta2);
    opt->set_eps(o.eps);
    opt->set_weight_decay(o.weight_decay);
    opt->set_lr_schedule(o.lr_schedule);
    opt->set_warmup_steps(o.warmup);
    opt->set_min_lr(o.min_lr);
    opt->set_decay_steps(o.decay_steps);
    opt->set_clip_grad_norm(o.clip);
  }
  for (int n : o.stage_layers) spec.add_stage_layers(n);
  v1::ModelSpec* ms = spec.mutable_model();
  ms->set_layers(o.layers);
  ms->set_hidden(o.hidden);
  ms->set_heads(o.heads);
  ms->set_kv_heads(o.kv_heads);
  ms->set_qkv_bias(o.qkv_bias);
  ms->set_sliding_window(o.sliding_window);
  ms->set_vocab(o.vocab);
  ms->set_seq_len(o.seq);
  ms->set_ffn_hidden(o.ffn);
  ms->set_seed(static_cast<uint64_t>(o.seed));

  const model::ModelConfig config = Config(o);
  // Initial weights are a pure function of (seed, name): the whole model in one stage has them.
  auto whole = model::StageModel::Create(config, model::WholeModel(config), {o.batch, o.microbatches});
  if (!whole.ok()) return whole.status();
  Weights("init/", **whole, dump);
  // Replica d's micro-batch j is the job's micro-batch d m + j (the single-process run's order).
  const int global_mbs = o.microbatches * o.dp;
  model::SyntheticData data(config.seed, o.vocab, o.seq, o.batch);  // the job's (data_seed 0)
  for (int step = 0; step < o.steps; ++step) {
    for (int mb = 0; mb < global_mbs; ++mb) Batch(o, step, mb, data.Batch(step, mb), dump);
  }

  auto run = worker::RunLocally(spec, {}, {}, /*keep_final_state=*/true);
  if (!run.ok()) return run.status();
  dump->F64("losses", worker::StepLosses(*run));
  std::vector<double> norms, lrs;
  for (const worker::StepReport& r : run->reports[0]) {
    norms.push_back(r.summary.grad_norm());
    lrs.push_back(r.summary.learning_rate());
  }
  dump->F64("grad_norms", norms);
  dump->F64("learning_rates", lrs);
  // "stage<k>/<name>/<what>[@begin]" on each rank -> "<what'>/<name>", whole: each tp rank's
  // slice (values from replica 0; moments put together from every replica's ZeRO shard), then
  // the slices joined as Megatron split them.
  const RankLayout layout = jobplan::LayoutOf(spec);
  std::map<std::string, std::span<const int64_t>> shapes;
  for (const model::ParameterRef& p : (*whole)->Parameters()) shapes[std::string(p.name)] = p.shape;
  std::map<std::pair<std::string, std::string>, std::vector<std::vector<float>>> slices;  // (what, name) -> [tp]
  for (int g = 0; g < layout.world(); ++g) {
    const int t = layout.TensorRank(g), d = layout.DataRank(g);
    for (const auto& [key, values] : run->final_state[g]) {
      const size_t a = key.find('/'), b = key.rfind('/');
      if (a == std::string::npos || b == a) return Internal("unexpected state tensor name " + key);
      const std::string name = key.substr(a + 1, b - a - 1), tail = key.substr(b + 1);
      const size_t at = tail.find('@');
      const std::string what = tail.substr(0, at);
      const bool shard = at != std::string::npos;  // part of a tensor's moments (ZeRO)
      // Every replica holds the same values, and without ZeRO the same moments; under ZeRO each
      // holds the moments of its shard (a tensor wholly inside it under its plain name).
      if (d != 0 && (what == "value" || o.zero == 0)) continue;
      auto shape = shapes.find(name);
      if (shape == shapes.end()) return Internal("state tensor " + key + " names no parameter");
      int64_t numel = 1;
      for (int64_t x : shape->second) numel *= x;
      if (model::TpSplitOf(name) != model::TpSplit::kWhole) numel /= layout.tp();
      auto& per_tp = slices[{what, name}];
      per_tp.resize(layout.tp());
      per_tp[t].resize(static_cast<size_t>(numel));
      const size_t begin = shard ? std::stoull(tail.substr(at + 1)) : 0;
      if (begin + values.size() > per_tp[t].size()) return Internal("state tensor " + key + " overruns its slice");
      std::copy(values.begin(), values.end(), per_tp[t].begin() + static_cast<std::ptrdiff_t>(begin));
    }
  }
  int found = 0;
  for (const auto& [key, per_tp] : slices) {
    const auto& [what, name] = key;
    const auto shape = shapes.at(name);
    const auto [rows, cols] = model::RowsCols(shape);
    std::vector<float> joined;
    switch (model::TpSplitOf(name)) {
      case model::TpSplit::kWhole:
        joined = per_tp[0];
        break;
      case model::TpSplit::kRows:  // row blocks, one after the other
        for (const auto& part : per_tp) joined.insert(joined.end(), part.begin(), part.end());
        break;
      case model::TpSplit::kColumns:  // each row: every rank's columns in turn
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t c = cols / layout.tp();
          for (const auto& part : per_tp) joined.insert(joined.end(), part.begin() + r * c, part.begin() + (r + 1) * c);
        }
        break;
    }
    const std::string prefix = what == "value" ? "final/" : "final_" + what + "/";
    dump->F32(prefix + name, Shape(shape), joined);
    found += what == "value" ? 1 : 0;
  }
  if (found != static_cast<int>(shapes.size())) {
    return Internal("the ranks hold " + std::to_string(found) + " parameters, the model has " +
                    std::to_string(shapes.size()));
  }
  auto num = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  // What the PyTorch run needs of spec.optimizer (a job without one decays nothing).
  dump->Meta("weight_decay", o.optimizer ? num(o.weight_decay) : "0");
  if (o.optimizer) {
    dump->Meta("beta1", num(o.beta1));
    dump->Meta("beta2", num(o.beta2));
    dump->Meta("eps", num(o.eps));
    dump->Meta("lr_schedule", o.lr_schedule);
    dump->Meta("warmup_steps", std::to_string(o.warmup));
    dump->Meta("min_lr", num(o.min_lr));
    dump->Meta("decay_steps", std::to_string(o.decay_steps));
    dump->Meta("clip_grad_norm", num(o.clip));
  }
  dump->Meta("microbatches", std::to_string(global_mbs));
  dump->Meta("schedule", o.schedule + (o.tp > 1 ? " tp " + std::to_string(o.tp) : "") +
                             (o.dp > 1 ? " dp " + std::to_string(o.dp) : "") +
                             (o.zero > 0 ? " zero " + std::to_string(o.zero) : "") + (o.sp ? " sp" : "") +
                             (o.recompute.empty() ? "" : " recompute " + o.recompute) + (o.optimizer ? " optimizer" : ""));
  return Status::Ok();
}

int Main(int argc, char** argv) {
  if (argc < 2 || (std::strcmp(argv[1], "microbatch") != 0 && std::strcmp(argv[1], "pipelined") != 0)) {
    std::fprintf(stderr, "usage: model_dump microbatch|pipelined --out FILE [flags] (--help)\n");
    return 2;
  }
  const std::string mode = argv[1];
  Options o;
  FlagSet flags("model_dump " + mode + " --out FILE [flags]",
                "Runs our C++ model and writes its weights, data, outputs and gradients as "
                "safetensors for the PyTorch reference.");
  flags.String("out", &o.out, "the safetensors file to write (required)");
  flags.Int("layers", &o.layers, "transformer blocks (default 2)");
  flags.Int("hidden", &o.hidden, "model width (default 32)");
  flags.Int("heads", &o.heads, "attention heads (default 4)");
  flags.Int("kv-heads", &o.kv_heads, "key/value heads, grouped-query attention; 0: heads (default 0)");
  flags.Bool("qkv-bias", &o.qkv_bias, "q, k, v projections with biases (Qwen2)");
  flags.Int("sliding-window", &o.sliding_window, "attention sees the last N tokens only (Mistral); 0: all (default 0)");
  flags.Int("vocab", &o.vocab, "vocabulary (default 64)");
  flags.Int("seq", &o.seq, "tokens per sample (default 16)");
  flags.Int("ffn", &o.ffn, "SwiGLU width; 0: the default rule (default 0)");
  flags.Int("batch", &o.batch, "samples per micro-batch (default 2)");
  flags.Int("seed", &o.seed, "model and data seed (default 7)");
  flags.Int("steps", &o.steps, "AdamW steps (default 3)");
  flags.Double("lr", &o.lr, "learning rate (default 0.01)");
  flags.Double("weight-decay", &o.weight_decay, "microbatch mode's AdamW weight decay (default 0.1)");
  flags.String("schedule", &o.schedule, "pipelined: the schedule (default 1f1b)");
  flags.Int("pp", &o.pp, "pipelined: pipeline ranks (default 2)");
  flags.Int("vpp", &o.vpp, "pipelined: chunks per rank, 0: the schedule's (default 0)");
  flags.Int("microbatches", &o.microbatches, "pipelined: micro-batches per step (default 4)");
  flags.IntList("stage-layers", &o.stage_layers, "pipelined: layers per rank (default even)");
  flags.Int("tp", &o.tp, "pipelined: tensor-parallel degree (default 1)");
  flags.Int("dp", &o.dp, "pipelined: data-parallel replicas (default 1)");
  flags.Int("zero", &o.zero, "pipelined: ZeRO stage (default 0)");
  flags.Bool("sp", &o.sp, "pipelined: sequence parallelism (with --tp > 1)");
  flags.String("recompute", &o.recompute, "pipelined: activation recompute, none|selective|full");
  flags.Bool("optimizer", &o.optimizer, "pipelined: set spec.optimizer from the flags below and --weight-decay");
  flags.Double("beta1", &o.beta1, "pipelined --optimizer: AdamW beta1 (default 0.9)");
  flags.Double("beta2", &o.beta2, "pipelined --optimizer: AdamW beta2 (default 0.95)");
  flags.Double("eps", &o.eps, "pipelined --optimizer: AdamW eps (default 1e-8)");
  flags.String("lr-schedule", &o.lr_schedule, "pipelined --optimizer: constant, cosine or linear");
  flags.Int("warmup", &o.warmup, "pipelined --optimizer: warmup steps (default 0)");
  flags.Double("min-lr", &o.min_lr, "pipelined --optimizer: the decay's floor (default 0)");
  flags.Int("decay-steps", &o.decay_steps, "pipelined --optimizer: decay steps, 0: the rest (default 0)");
  flags.Double("clip", &o.clip, "pipelined --optimizer: clip the global gradient norm to this, 0: none");
  Status st = flags.Parse(argc - 2, argv + 2);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (st.ok() && o.out.empty()) st = InvalidArgument("--out: required");
  Dump dump;
  if (st.ok()) {
    ShapeMeta(o, &dump);
    st = mode == "microbatch" ? MicroBatch(o, &dump) : Pipelined(o, &dump);
  }
  if (st.ok()) st = dump.Write(o.out);
  if (!st.ok()) {
    std::fprintf(stderr, "model_dump: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace pipecoord

int main(int argc, char** argv) { return pipecoord::Main(argc, argv); }
