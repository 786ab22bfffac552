#include "memory/pipecoord_cuda.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "memory/activations.h"
#include "memory/param_states.h"
#include "memory/recipe.h"

namespace pipecoord::memory {
namespace {

// What the backend allocates besides the recipe's saved tensors, in the recipe's terms (the
// names the timelines below use).
const std::vector<RecipeTensor>& BackendTensors() {
  static const std::vector<RecipeTensor> kTensors = {
      {"stage.boundary", "boundary",
       "an activation [b, s, h] between blocks or stages (the embedding's output, a block's "
       "output, a stage's input or output) or its gradient",
       {"s", "b", "h"}, ElemType::kAct, kSeqSplit, "", 0},
      {"mlp.grad_z", "b_transient", "dz, gradient of the SwiGLU product, freed once dgate and dup exist",
       {"s", "b", "f"}, ElemType::kAct, 2, "", 0},
      {"attention.grad_output", "b_transient", "dout, gradient of flash attention's output",
       {"s", "b", "a*d"}, ElemType::kAct, 2, "", 0},
      {"attention.delta", "b_transient", "rowsum(dout * o) per query row (fp32), flash attention's backward",
       {"b", "a", "s"}, ElemType::kFp32, 1, "", 0},
      {"rope.table", "constant", "RoPE's cos (or sin) table: s x head_dim / 2 doubles, s x head_dim x 4 bytes",
       {"s", "d", "4"}, ElemType::kU8, kWholeOnEveryRank, "", 0},  // attention runs on every token
      {"loss.sum", "constant", "the head's device-side sum of the step's losses (one double)",
       {"8", "1"}, ElemType::kU8, 1, "", 0},
  };
  return kTensors;
}

// Sums that refuse to wrap around.
class Bytes {
 public:
  void Add(int64_t v) { overflow_ = overflow_ || __builtin_add_overflow(value_, v, &value_); }
  void AddTimes(int64_t n, int64_t v) {
    int64_t product = 0;
    overflow_ = overflow_ || __builtin_mul_overflow(n, v, &product);
    Add(product);
  }
  void Fail() { overflow_ = true; }
  int64_t value() const { return value_; }
  bool overflow() const { return overflow_; }

 private:
  int64_t value_ = 0;
  bool overflow_ = false;
};

// The pool bytes of every tensor by name, and the recipe's lists for the per-micro-batch sums.
struct PoolSizes {
  std::map<std::string, int64_t> by_name;
  std::vector<ResolvedTensor> layer, full, w_grads, first, first_w, last, last_w;
};

Result<PoolSizes> Resolve(const ModelSpec& model, const TrainingSpec& training) {
  const Recipe& r = PipecoordCudaRecipe();
  PoolSizes p;
  std::vector<ResolvedTensor> backend;
  const std::pair<const std::vector<RecipeTensor>*, std::vector<ResolvedTensor>*> lists[] = {
      {&r.layer, &p.layer},        {&r.full_recompute, &p.full}, {&r.w_grads, &p.w_grads},
      {&r.first_stage, &p.first},  {&r.first_stage_w_grads, &p.first_w},
      {&r.last_stage, &p.last},    {&r.last_stage_w_grads, &p.last_w},
      {&r.last_stage_transient, &backend}, {&BackendTensors(), &backend}};
  for (const auto& [from, to] : lists) {
    auto resolved = ResolveTensors(*from, model, training);
    if (!resolved.ok()) return resolved.status();
    for (ResolvedTensor& t : *resolved) {
      p.by_name[t.name] = CudaPoolBytes(t.bytes);
      to->push_back(std::move(t));
    }
  }
  return p;
}

// Pool bytes of the tensors (with all of `need_flags`) of one list.
int64_t PoolSum(const std::vector<ResolvedTensor>& ts, Bytes* check, unsigned need_flags = 0) {
  Bytes sum;
  for (const ResolvedTensor& t : ts) {
    if ((t.flags & need_flags) == need_flags) sum.Add(CudaPoolBytes(t.bytes));
  }
  if (sum.overflow()) check->Fail();
  return sum.value();
}

// One op's allocations and frees in the backend's order: the level above the op's start and the
// most it reached.
class Timeline {
 public:
  explicit Timeline(const PoolSizes& sizes) : sizes_(sizes) {}
  void Alloc(const char* name) { Step(name, +1); }
  void Free(const char* name) { Step(name, -1); }
  // Pool bytes outside the recipe's named tensors (the tensor-parallel sums'), and a transient
  // that is freed before the next allocation.
  void AllocBytes(int64_t bytes) { Add(bytes); }
  void FreeBytes(int64_t bytes) { Add(-bytes); }
  void Transient(int64_t bytes) {
    Add(bytes);
    Add(-bytes);
  }
  int64_t level() const { return level_.value(); }
  int64_t peak() const { return peak_; }
  bool overflow() const { return level_.overflow(); }
  const std::string& unknown() const { return unknown_; }

 private:
  void Step(const char* name, int sign) {
    auto it = sizes_.by_name.find(name);
    if (it == sizes_.by_name.end()) {
      if (unknown_.empty()) unknown_ = name;
      return;
    }
    Add(sign * it->second);
  }
  void Add(int64_t bytes) {
    level_.Add(bytes);
    peak_ = std::max(peak_, level_.value());
  }

  const PoolSizes& sizes_;
  Bytes level_;
  int64_t peak_ = 0;
  std::string unknown_;
};

// What the tensor-parallel group's collectives allocate (CudaStageModel under tp > 1), in pool
// bytes; nothing at tp 1.
struct GroupSums {
  int tp = 1;
  bool sp = false;
  bool bf16 = false;
  int64_t tokens = 0, hidden = 0;

  int64_t Elem() const { return bf16 ? 2 : 4; }
  int64_t Chunk(int64_t count) const { return CudaPoolBytes(4 * ((count + tp - 1) / tp)); }
  // ReduceFromTensorParallel of L floats: bf16 widens the tensor to f32 first; the ring's
  // largest chunk is on top (one at a time: the sent one is freed before the received one).
  void Reduce(Timeline& t, int64_t count) const {
    if (tp == 1) return;
    const int64_t widened = bf16 ? CudaPoolBytes(4 * count) : 0;
    t.AllocBytes(widened);
    t.Transient(Chunk(count));
    t.FreeBytes(widened);
  }
  // Megatron's g after a row-parallel layer (and f's backward) into `out`: with sequence
  // parallelism the partial [T, h] made, reduce-scattered (bf16: through an f32 copy), `out`
  // (this rank's rows) made and the partial freed; else `out` itself is the partial, summed in
  // place.
  void SumOverGroup(Timeline& t, const char* out) const {
    const int64_t count = tokens * hidden;
    if (!sp) {
      t.Alloc(out);
      Reduce(t, count);
      return;
    }
    const int64_t partial = CudaPoolBytes(Elem() * count), widened = bf16 ? CudaPoolBytes(4 * count) : 0;
    t.AllocBytes(partial);
    t.AllocBytes(widened);
    t.Transient(Chunk(count));
    t.Alloc(out);
    t.FreeBytes(widened);
    t.FreeBytes(partial);
  }
  // GatherSequence of a [T / tp, h] shard into a new [T, h], then freed by its user (nothing
  // without sequence parallelism): the f32 buffer, the ring's chunks, in bf16 the bf16 result
  // made and the f32 one freed.
  void GatherAndFree(Timeline& t) const {
    if (!sp) return;
    const int64_t count = tokens * hidden, all32 = CudaPoolBytes(4 * count);
    t.AllocBytes(all32);
    t.Transient(Chunk(count));
    if (bf16) {
      t.AllocBytes(CudaPoolBytes(2 * count));
      t.FreeBytes(all32);
      t.FreeBytes(CudaPoolBytes(2 * count));
    } else {
      t.FreeBytes(all32);
    }
  }
  // VocabParallelLoss: the group's row maxima (gathered in place: chunks of `tokens` floats),
  // the row maxima and the sums (2 per row, summed over the group), freed at its end.
  void Loss(Timeline& t) const {
    if (tp == 1) return;
    const int64_t maxima = CudaPoolBytes(4 * tokens * tp), row_max = CudaPoolBytes(4 * tokens),
                  sums = CudaPoolBytes(8 * tokens);
    t.AllocBytes(maxima);
    t.Transient(CudaPoolBytes(4 * tokens));
    t.AllocBytes(row_max);
    t.AllocBytes(sums);
    t.FreeBytes(maxima);
    t.Transient(Chunk(2 * tokens));
    t.FreeBytes(row_max);
    t.FreeBytes(sums);
  }
};

// BlockForward's allocations after its input: the BlockState it fills, then its output; the
// group's sums after wo (into ffn_norm.input, x1) and after w2 (into the output); with sequence
// parallelism the gathers of a and c before the column-parallel layers.
void BlockForward(Timeline& t, const GroupSums& g) {
  for (const char* name : {"attention_norm.rstd", "attention.qkv_input", "attention.q", "attention.k", "attention.v"}) {
    t.Alloc(name);
  }
  g.GatherAndFree(t);  // a
  t.Alloc("attention.wo_input");
  t.Alloc("attention.lse");
  g.SumOverGroup(t, "ffn_norm.input");  // row-parallel wo
  for (const char* name : {"ffn_norm.rstd", "mlp.w1_w3_input", "mlp.gate", "mlp.up"}) t.Alloc(name);
  g.GatherAndFree(t);  // c
  t.Alloc("mlp.w2_input");
  // The block's output (the next block's x, the head's, or the stage's), row-parallel w2.
  g.SumOverGroup(t, "stage.boundary");
}

void FreeBlockState(Timeline& t) {
  for (const char* name : {"attention_norm.rstd", "attention.qkv_input", "attention.q", "attention.k", "attention.v",
                           "attention.wo_input", "attention.lse", "ffn_norm.input", "ffn_norm.rstd", "mlp.w1_w3_input",
                           "mlp.gate", "mlp.up", "mlp.w2_input"}) {
    t.Free(name);
  }
}

// CudaStageModel::ForwardAs and BlockForward, allocation by allocation. Full recompute: each
// block's state but its input is freed once the block's output exists.
void ForwardTimeline(Timeline& t, const GroupSums& g, int64_t layers, bool has_embedding, bool has_head, bool full) {
  if (has_embedding) {
    t.Alloc("embedding.ids");             // the token ids uploaded
    g.SumOverGroup(t, "stage.boundary");  // the embedding's output x (vocabulary-parallel: summed)
  } else {
    t.Alloc("stage.boundary");  // the activation received from the previous stage
  }
  for (int64_t l = 0; l < layers; ++l) {
    // The block's input x is there (the previous tensor); it keeps it.
    BlockForward(t, g);
    if (full) FreeBlockState(t);
  }
  if (has_head) {
    t.Alloc("final_norm.rstd");
    t.Alloc("output.input");
    t.Alloc("loss.logits");
    g.GatherAndFree(t);  // y, for every token's logits
    t.Alloc("loss.targets");
    t.Alloc("loss.value");  // the micro-batch's loss, added to the step's sum, then dropped
    g.Loss(t);
    t.Free("loss.value");
  }
}

// CudaStageModel::BackwardInputAs and BlockBackwardInput, allocation by allocation. Full
// recompute: each block's forward runs again first (its output dropped at once).
void BackwardTimeline(Timeline& t, const GroupSums& g, int64_t layers, bool has_head, bool full) {
  if (has_head) {
    t.Free("loss.logits");  // the cross-entropy backward writes dlogits over the logits
    t.Alloc("grad.logits");
    t.Free("loss.targets");
    g.SumOverGroup(t, "grad.final_norm_output");  // the vocabulary-parallel head's input gradient
    t.Alloc("stage.boundary");  // the gradient of the head's input: the last block's dy
  } else {
    t.Alloc("stage.boundary");  // the gradient received from the next stage: the last block's dy
  }
  for (int64_t l = 0; l < layers; ++l) {
    if (full) {
      BlockForward(t, g);
      t.Free("stage.boundary");  // the rebuilt output, not needed
    }
    t.Alloc("mlp.grad_z");
    g.GatherAndFree(t);  // dy
    t.Alloc("grad.w1_output");
    t.Alloc("grad.w3_output");
    t.Free("mlp.grad_z");
    t.Free("mlp.gate");
    t.Free("mlp.up");
    g.SumOverGroup(t, "grad.ffn_norm_output");  // column-parallel w1, w3's input gradient
    t.Alloc("grad.wo_output");  // dy copied (residual path); dy itself stays for W
    t.Alloc("attention.grad_output");
    g.GatherAndFree(t);  // dx1
    t.Alloc("grad.wq_output");
    t.Alloc("grad.wk_output");
    t.Alloc("grad.wv_output");
    t.Alloc("attention.delta");
    t.Free("attention.delta");
    t.Free("attention.grad_output");
    t.Free("attention.q");
    t.Free("attention.k");
    t.Free("attention.v");
    t.Free("attention.lse");
    g.SumOverGroup(t, "grad.attention_norm_output");  // column-parallel wq, wk, wv's input gradient
    t.Alloc("stage.boundary");  // dx1 copied: the block input's gradient, the next block's dy
  }
  // With the embedding, the last gradient is the embedding output's (kept for W); without it,
  // it is handed to the previous stage.
}

// CudaStageModel::BackwardWeightAs: nothing but frees without sequence parallelism; with it the
// gathers of y (head), of dy, c, dx1 and a (each block, each freed before the next) and of the
// embedding output's gradient, while the state is freed piece by piece (head, then each block).
void WeightTimeline(Timeline& t, const GroupSums& g, int64_t layers, bool has_embedding, bool has_head,
                    int64_t head_kept, int64_t block_kept) {
  if (has_head) {
    g.GatherAndFree(t);
    t.FreeBytes(head_kept);
  }
  for (int64_t l = 0; l < layers; ++l) {
    for (int k = 0; k < 4; ++k) g.GatherAndFree(t);
    t.FreeBytes(block_kept);
  }
  if (has_embedding) g.GatherAndFree(t);
}

}  // namespace

ModelSpec PipecoordCudaModel(int layers, int64_t hidden, int64_t ffn, int64_t heads, int64_t vocab,
                             int64_t seq_len, int64_t kv_heads, int64_t head_dim, bool qkv_bias,
                             bool tied_embeddings) {
  ModelSpec m;
  m.name = "pipecoord-cuda";
  m.layers = layers;
  m.hidden = hidden;
  m.ffn = ffn;
  m.heads = heads;
  m.kv_heads = kv_heads > 0 ? kv_heads : heads;
  m.head_dim = head_dim;
  m.qkv_bias = qkv_bias;
  m.vocab = vocab;
  m.seq_len = seq_len;
  m.tied_embeddings = tied_embeddings;
  m.norm = Norm::kRmsNorm;
  m.mlp = Mlp::kSwiGlu;
  m.attention = Attention::kFlash;
  m.linear_bias = false;
  m.dropout = false;
  return m;
}

TrainingSpec PipecoordCudaTraining(int micro_batch, DtypePolicy precision, int zero, int dp, Recompute recompute,
                                   int tp, bool sp) {
  TrainingSpec t;
  t.micro_batch = micro_batch;
  t.dtype = precision;
  t.optimizer = Optimizer::kAdamW;
  t.fp32_grads = true;
  t.zero = zero;
  t.dp = std::max(1, dp);
  t.tp = std::max(1, tp);
  t.sp = sp && t.tp > 1;
  t.recompute = recompute;
  t.recipe = "pipecoord-cuda";
  return t;
}

int64_t CudaPoolBytes(int64_t bytes) {
  if (bytes <= 0) return 0;  // a 0-byte tensor takes no block
  if (bytes > INT64_MAX - kCudaPoolUnit) return INT64_MAX / kCudaPoolUnit * kCudaPoolUnit;
  return (bytes + kCudaPoolUnit - 1) / kCudaPoolUnit * kCudaPoolUnit;
}

std::vector<int64_t> PipecoordCudaWeightTensors(const ModelSpec& m, int64_t layers, bool has_embedding,
                                                bool has_head, int tp) {
  // q and o are heads x head_dim wide, k and v kv_heads x head_dim (this rank's 1/t of each).
  const int64_t h = m.hidden, t = std::max(1, tp), f = m.ffn / t, v = m.vocab / t, q = m.QWidth() / t,
                kv = m.kv_heads * m.HeadDim() / t;
  std::vector<int64_t> out;
  if (has_embedding) out.push_back(v * h);
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t n : {h, q * h, kv * h, kv * h, h * q, h, f * h, h * f, f * h}) out.push_back(n);
    if (m.qkv_bias) {
      for (int64_t n : {q, kv, kv}) out.push_back(n);
    }
  }
  if (has_head) {
    out.push_back(h);
    if (!m.tied_embeddings || !has_embedding) out.push_back(v * h);  // tied: the embedding's tensor itself
  }
  return out;
}

Result<CudaStageMemory> PipecoordCudaStage(const ModelSpec& model, const TrainingSpec& training,
                                           int64_t layers, bool has_embedding, bool has_head) {
  auto resolved = Resolve(model, training);
  if (!resolved.ok()) return resolved.status();
  const PoolSizes& p = *resolved;
  Bytes check;  // collects every overflow
  CudaStageMemory out;

  // Parameters: four fp32 tensors each (master, grad, m, v), plus the bf16 copy in bf16; under
  // ZeRO-1 m and v are the shard's two flat tensors instead, and in bf16 the masters too
  // (CudaStageModel::ShardOptimizerStates); ZeRO-2 makes the gradients a flat shard as well.
  const bool copy = training.dtype != DtypePolicy::kFp32;
  const bool sharded = training.zero >= 1 && training.dp > 1, zero2 = sharded && training.zero >= 2;
  const bool shard_masters = sharded && copy;
  Bytes count, params, whole_grads;
  for (int64_t n : PipecoordCudaWeightTensors(model, layers, has_embedding, has_head, training.tp)) {
    count.Add(n);
    int64_t fp32 = 0;
    if (__builtin_mul_overflow(n, int64_t{4}, &fp32)) check.Fail();
    // whole fp32 tensors: master (unless sharded), grad (unless ZeRO-2), m and v (unless ZeRO)
    const int whole = (shard_masters ? 0 : 1) + (zero2 ? 0 : 1) + (sharded ? 0 : 2);
    params.AddTimes(whole, CudaPoolBytes(fp32));
    whole_grads.Add(CudaPoolBytes(fp32));
    if (copy) params.Add(CudaPoolBytes(2 * n));
  }
  out.parameters = count.value();
  if (sharded) {
    const int64_t shard = out.parameters / training.dp + (out.parameters % training.dp != 0 ? 1 : 0);
    int64_t fp32 = 0;
    if (__builtin_mul_overflow(shard, int64_t{4}, &fp32)) check.Fail();
    // m, v (and the masters in bf16, ZeRO-2's gradients), flat
    params.AddTimes(2 + (shard_masters ? 1 : 0) + (zero2 ? 1 : 0), CudaPoolBytes(fp32));
    if (zero2) {
      out.shard_gradient_bytes = CudaPoolBytes(fp32);
      out.whole_gradient_bytes = whole_grads.value();
    }
  }
  if (whole_grads.overflow()) check.Fail();
  out.parameter_bytes = params.value();
  out.parameter_recipe_bytes = ParamStateBytes(out.parameters, training).total();
  if (layers > 0) out.constant_bytes += 2 * p.by_name.at("rope.table");
  if (has_head) out.constant_bytes += p.by_name.at("loss.sum");

  // Per micro-batch, from the recipe.
  Bytes stored, kept;
  const bool full = training.recompute == Recompute::kFull;
  stored.AddTimes(layers, PoolSum(full ? p.full : p.layer, &check));
  kept.AddTimes(layers, PoolSum(p.layer, &check, kWeightInput) + PoolSum(p.w_grads, &check));
  if (has_embedding) {
    stored.Add(PoolSum(p.first, &check));
    kept.Add(PoolSum(p.first, &check, kWeightInput) + PoolSum(p.first_w, &check));
  }
  if (has_head) {
    stored.Add(PoolSum(p.last, &check));
    kept.Add(PoolSum(p.last, &check, kWeightInput) + PoolSum(p.last_w, &check));
  }
  out.per_microbatch.stored = stored.value();
  out.per_microbatch.kept_for_w = kept.value();
  out.boundary_bytes = p.by_name.at("stage.boundary");

  // The ops' peaks, from the backend's order.
  Timeline f(p), b(p), w(p);
  const GroupSums g{std::max(1, training.tp), training.sp && training.tp > 1, training.dtype != DtypePolicy::kFp32,
                    model.seq_len * training.micro_batch, model.hidden};
  ForwardTimeline(f, g, layers, has_embedding, has_head, full);
  BackwardTimeline(b, g, layers, has_head, full);
  WeightTimeline(w, g, layers, has_embedding, has_head,
                 has_head ? PoolSum(p.last, &check, kWeightInput) + PoolSum(p.last_w, &check) : 0,
                 PoolSum(p.layer, &check, kWeightInput) + PoolSum(p.w_grads, &check));
  for (const Timeline* t : {&f, &b}) {
    if (!t->unknown().empty()) {
      return Internal("pipecoord-cuda timeline: tensor \"" + t->unknown() + "\" is not in the recipe");
    }
  }
  if (check.overflow() || count.overflow() || params.overflow() || stored.overflow() || kept.overflow() ||
      f.overflow() || b.overflow() || w.overflow()) {
    return InvalidArgument("pipecoord-cuda: the stage's sizes overflow 64-bit integers");
  }
  out.forward_peak = f.peak();
  out.backward_peak = b.peak();
  out.weight_peak = w.peak();
  // What the ops leave must be what the recipe says F stores and B keeps, plus the output.
  const int64_t f_out = has_head ? 0 : out.boundary_bytes;
  const int64_t b_out = has_embedding ? 0 : out.boundary_bytes;
  if (f.level() != out.per_microbatch.stored + f_out ||
      b.level() != out.per_microbatch.kept_for_w - out.per_microbatch.stored + b_out) {
    return Internal("pipecoord-cuda: the op timelines leave F " + std::to_string(f.level()) + " and B " +
                    std::to_string(b.level()) + " bytes, the recipe " +
                    std::to_string(out.per_microbatch.stored + f_out) + " and " +
                    std::to_string(out.per_microbatch.kept_for_w - out.per_microbatch.stored + b_out));
  }
  return out;
}

}  // namespace pipecoord::memory
