#include "memory/pipecoord_cpu.h"

#include <algorithm>
#include <initializer_list>

#include "memory/param_states.h"

namespace pipecoord::memory {
namespace {

// One op's allocations and frees, in bytes: the level above the op's start and the most reached.
class Timeline {
 public:
  void Alloc(int64_t bytes) {
    level_ += bytes;
    peak_ = std::max(peak_, level_);
  }
  void Free(int64_t bytes) { level_ -= bytes; }
  int64_t level() const { return level_; }
  int64_t peak() const { return peak_; }

 private:
  int64_t level_ = 0, peak_ = 0;
};

// A tensor made and dropped within one step of an op (a gathered input read once).
void Passing(Timeline& t, int64_t bytes) {
  t.Alloc(bytes);
  t.Free(bytes);
}

// worker/model's sizes on this rank: bytes (fp32 floats, int32 ids), except the two row counts.
struct CpuSizes {
  bool sp = false;     // sequence parallelism in effect (tp > 1)
  int64_t ids = 0;     // T int32: token ids or targets
  int64_t tokens_h = 0;  // n h: a full-sequence activation
  int64_t local_h = 0;   // nl h: a sequence shard with sp, else n h (the boundary)
  int64_t rows = 0;      // count, nl: a norm's per-token 1/rms
  int64_t width = 0;     // n a d / tp: q, o and their gradients (d = h / a unless head_dim)
  int64_t kv = 0;        // n g d / tp: k, v and their gradients (grouped-query attention)
  int64_t ffn = 0;       // n f / tp: gate, up, z and their gradients
  int64_t probs = 0;     // b (a / tp) s s
  int64_t logits = 0;    // n v / tp
  int64_t loss_rows = 0;  // count, n: the parallel loss's per-row figures
  int tp = 1;
  Recompute recompute = Recompute::kNone;
};

// A row-parallel partial sum (made by the caller) becomes this rank's tokens of the sum under
// sequence parallelism (parallel::ScatterSequence); reduced in place otherwise.
void ScatterPartialSum(Timeline& t, const CpuSizes& z) {
  if (!z.sp) return;
  t.Alloc(z.local_h);
  t.Free(z.tokens_h);
}

bool Mul(std::initializer_list<int64_t> factors, int64_t* out) {
  int64_t v = 1;
  for (int64_t f : factors) {
    if (__builtin_mul_overflow(v, f, &v)) return false;
  }
  *out = v;
  return true;
}

// TransformerBlock::ForwardAll from its input (counted by the caller): everything it keeps, then
// its output y (a shard with sp), the gathered a and c freed as it returns.
void BlockForwardAll(Timeline& t, const CpuSizes& z) {
  t.Alloc(4 * z.rows);      // rstd1
  t.Alloc(z.local_h);       // a
  if (z.sp) t.Alloc(z.tokens_h);  // a gathered
  t.Alloc(z.width);         // q
  t.Alloc(z.kv);            // k
  t.Alloc(z.kv);            // v
  t.Alloc(z.probs);
  t.Alloc(z.width);         // o
  t.Alloc(z.tokens_h);      // wo's partial sum, x1
  ScatterPartialSum(t, z);
  t.Alloc(4 * z.rows);      // rstd2
  t.Alloc(z.local_h);       // c
  if (z.sp) t.Alloc(z.tokens_h);  // c gathered
  t.Alloc(z.ffn);           // gate
  t.Alloc(z.ffn);           // up
  t.Alloc(z.ffn);           // z
  t.Alloc(z.tokens_h);      // w2's partial sum, y
  ScatterPartialSum(t, z);
  if (z.sp) t.Free(2 * z.tokens_h);  // a and c gathered
}

// What a block's F keeps (BlockSaved), its input x included.
int64_t BlockSavedBytes(const CpuSizes& z) {
  return z.local_h + 4 * z.rows + z.local_h + z.width + 2 * z.kv + z.probs + z.width + z.local_h + 4 * z.rows +
         z.local_h + 3 * z.ffn;
}

// TransformerBlock::Forward: ForwardAll, then what the recompute mode drops; `keep` false: the
// whole state dropped after (StageModel::ForwardInto without a micro-batch), the output left.
void BlockForward(Timeline& t, const CpuSizes& z, bool keep) {
  BlockForwardAll(t, z);
  if (!keep) {
    t.Free(BlockSavedBytes(z));
  } else if (z.recompute == Recompute::kSelective) {
    t.Free(z.probs);
  } else if (z.recompute == Recompute::kFull) {
    t.Free(BlockSavedBytes(z) - z.local_h);  // all but the input
  }
}

// TransformerBlock::BackwardInput from the gradient dy (counted by the caller; kept for W).
void BlockBackwardInput(Timeline& t, const CpuSizes& z) {
  if (z.recompute == Recompute::kSelective) {  // Rebuild: the probabilities, a scratch o
    t.Alloc(z.probs);
    Passing(t, z.width);
  } else if (z.recompute == Recompute::kFull) {  // Rebuild: the whole forward, its output dropped
    BlockForwardAll(t, z);
    t.Free(z.local_h);
  }
  t.Alloc(z.ffn);  // dz
  if (z.sp) Passing(t, z.tokens_h);  // dy gathered
  t.Alloc(z.ffn);  // dgate
  t.Alloc(z.ffn);  // dup
  t.Free(3 * z.ffn);  // dz, gate, up
  t.Alloc(z.tokens_h);  // dc, the partial sum
  ScatterPartialSum(t, z);
  t.Alloc(z.local_h);  // dx1, dy copied (the residual path)
  t.Alloc(z.width);    // dout
  if (z.sp) Passing(t, z.tokens_h);  // dx1 gathered
  t.Alloc(z.width);  // dq
  t.Alloc(z.kv);     // dk
  t.Alloc(z.kv);     // dv
  t.Free(2 * z.width + 2 * z.kv + z.probs);  // dout, q, k, v, the probabilities
  t.Alloc(z.tokens_h);            // da, the partial sum
  ScatterPartialSum(t, z);
  t.Alloc(z.local_h);  // dx, dx1 copied: the block input's gradient
}

// What a block keeps from B until W: F's state less q, k, v, the probabilities, gate and up, plus
// dy, dgate, dup, dc, dx1, dq, dk, dv, da.
int64_t BlockKeptBytes(const CpuSizes& z) {
  return BlockSavedBytes(z) - z.width - 2 * z.kv - z.probs - 2 * z.ffn + z.local_h + 2 * z.ffn + z.local_h +
         z.local_h + z.width + 2 * z.kv + z.local_h;
}

// LmHead::Forward from its input (counted by the caller) and the targets (ForwardInto's, counted
// by the caller): everything HeadSaved keeps, the loss's temporaries; `keep` false: dropped after.
void HeadForward(Timeline& t, const CpuSizes& z, bool keep) {
  t.Alloc(4 * z.rows);   // rstd
  t.Alloc(z.local_h);    // y
  t.Alloc(z.logits);
  if (z.sp) t.Alloc(z.tokens_h);  // y gathered
  t.Alloc(z.ids);        // the targets, copied
  if (z.tp > 1) {        // ParallelLoss: each row's max and sums over the group
    t.Alloc(4 * z.loss_rows);         // this rank's row maxima
    t.Alloc(4 * z.loss_rows * z.tp);  // everyone's
    t.Alloc(4 * z.loss_rows);         // the row maxima
    t.Alloc(8 * z.loss_rows);         // the sums
    t.Free(4 * z.loss_rows);          // the row maxima, dropped
    t.Free(4 * z.loss_rows * (3 + z.tp));  // this rank's maxima, everyone's, the sums
  }
  if (z.sp) t.Free(z.tokens_h);
  if (!keep) t.Free(z.local_h + 4 * z.rows + z.local_h + z.logits + z.ids);  // the input x too
}

// StageModel::ForwardInto (with CpuBackend::Forward's batch ids): `keep` false is ForwardOnly's.
void StageForward(Timeline& t, const CpuSizes& z, int64_t layers, bool has_embedding, bool has_head, bool keep) {
  if (has_embedding) t.Alloc(z.ids);  // token ids
  if (has_head) t.Alloc(z.ids);       // targets
  if (has_embedding) {
    t.Alloc(z.tokens_h);  // the embedding's output (vocabulary-parallel: this rank's rows, summed)
    ScatterPartialSum(t, z);
  } else {
    t.Alloc(z.local_h);  // the input, taken
  }
  for (int64_t l = 0; l < layers; ++l) BlockForward(t, z, keep);
  if (has_head) HeadForward(t, z, keep);
  if (has_head) t.Free(z.ids);  // ForwardInto's targets (the head keeps its copy)
  if (has_embedding && !keep) t.Free(z.ids);
}

// StageModel::Backward (B): the head's, then each block's; the embedding keeps the last gradient.
void StageBackward(Timeline& t, const CpuSizes& z, int64_t layers, bool has_head) {
  if (has_head) {
    t.Alloc(z.logits);                 // dlogits
    t.Free(z.logits + z.ids);          // the probabilities and the targets
    t.Alloc(z.tokens_h);               // dy (the partial sum with tp)
    ScatterPartialSum(t, z);
    t.Alloc(z.local_h);                // dx: the last block's dy
  } else {
    t.Alloc(z.local_h);  // the gradient received, taken
  }
  for (int64_t l = 0; l < layers; ++l) BlockBackwardInput(t, z);
}

// StageModel::BackwardWeight after EnsureGradients: the head's W, each block's, the embedding's.
void StageWeight(Timeline& t, const CpuSizes& z, int64_t layers, bool has_embedding, bool has_head) {
  if (has_head) {
    if (z.sp) t.Alloc(z.tokens_h);  // y gathered
    t.Free(z.local_h + 4 * z.rows + z.local_h + z.logits + z.local_h);  // x, rstd, y, dlogits, dy
    if (z.sp) t.Free(z.tokens_h);
  }
  for (int64_t l = 0; l < layers; ++l) {
    if (z.sp) {  // dy, c, dx1, a gathered again, each replacing the last
      t.Alloc(z.tokens_h);
      for (int k = 0; k < 3; ++k) Passing(t, z.tokens_h);  // made before the last is dropped
    }
    t.Free(BlockKeptBytes(z));
    if (z.sp) t.Free(z.tokens_h);
  }
  if (has_embedding) {
    if (z.sp) {  // the embedding output's gradient, every token's rows again
      t.Alloc(z.tokens_h);
      t.Free(z.local_h);
    }
    t.Free(z.ids + (z.sp ? z.tokens_h : z.local_h));
  }
}

}  // namespace


ModelSpec PipecoordCpuModel(int layers, int64_t hidden, int64_t ffn, int64_t heads, int64_t vocab,
                            int64_t seq_len, int64_t kv_heads, bool qkv_bias, bool tied_embeddings, int64_t head_dim) {
  ModelSpec m;
  m.name = "pipecoord-cpu";
  m.layers = layers;
  m.hidden = hidden;
  m.ffn = ffn;
  m.heads = heads;
  m.kv_heads = kv_heads > 0 ? kv_heads : heads;
  m.qkv_bias = qkv_bias;
  m.vocab = vocab;
  m.seq_len = seq_len;
  m.tied_embeddings = tied_embeddings;
  m.head_dim = head_dim;
  m.norm = Norm::kRmsNorm;
  m.mlp = Mlp::kSwiGlu;
  m.attention = Attention::kEager;
  m.linear_bias = false;
  m.dropout = false;
  return m;
}

TrainingSpec PipecoordCpuTraining(int micro_batch, int tp, int zero, int dp, Recompute recompute, bool sp) {
  TrainingSpec t;
  t.micro_batch = micro_batch;
  t.dtype = DtypePolicy::kFp32;
  t.optimizer = Optimizer::kAdamW;
  t.fp32_grads = true;
  t.zero = zero;
  t.dp = dp;
  t.tp = tp;
  t.sp = sp;
  t.recompute = recompute;
  t.recipe = "pipecoord-cpu";
  return t;
}

CpuStageMemory PipecoordCpuStage(const ModelSpec& model, const TrainingSpec& training,
                                 const ActivationModel& am, int64_t layers, bool has_embedding,
                                 bool has_head) {
  const ParamCounts c = CountParams(model, training.tp);
  CpuStageMemory out;
  out.parameters = layers * c.per_block;
  out.per_microbatch.stored = layers * am.block.stored_bytes;
  out.per_microbatch.kept_for_w = layers * am.block.w_bytes;
  if (has_embedding) {
    out.parameters += c.embedding + c.positions;
    out.per_microbatch.stored += am.first.stored_bytes;
    out.per_microbatch.kept_for_w += am.first.w_bytes;
  }
  if (has_head) {
    // Tied: a stage with the embedding uses it as the head; every other head stage keeps a copy
    // (StageModel), even where both stages sit on one rank (a V schedule's rank 0).
    out.parameters += c.final_norm + (model.tied_embeddings && has_embedding ? 0 : c.lm_head);
    out.per_microbatch.stored += am.last.stored_bytes;
    out.per_microbatch.kept_for_w += am.last.w_bytes;
  }
  out.parameter_bytes = ParamStateBytes(out.parameters, training).total();
  return out;
}

Result<CpuOpPeaks> PipecoordCpuOpPeaks(const ModelSpec& model, const TrainingSpec& training, int64_t layers,
                                       bool has_embedding, bool has_head) {
  CpuSizes z;
  z.tp = std::max(1, training.tp);
  z.sp = training.sp && z.tp > 1;
  z.recompute = training.recompute;
  const int64_t n = training.micro_batch * model.seq_len;  // tokens
  const int64_t nl = z.sp ? n / z.tp : n;
  z.rows = nl;
  z.loss_rows = n;
  bool ok = Mul({4, n}, &z.ids) && Mul({4, n, model.hidden}, &z.tokens_h) && Mul({4, nl, model.hidden}, &z.local_h) &&
            Mul({4, n, model.QWidth() / z.tp}, &z.width) &&
            Mul({4, n, model.kv_heads * model.HeadDim() / z.tp}, &z.kv) &&
            Mul({4, n, model.ffn / z.tp}, &z.ffn) &&
            Mul({4, training.micro_batch, model.heads / z.tp, model.seq_len, model.seq_len}, &z.probs) &&
            Mul({4, n, model.vocab / z.tp}, &z.logits);
  int64_t bound = 0;  // every level below stays under this many bytes, so nothing below wraps
  ok = ok && Mul({layers + 4, 64, std::max({z.tokens_h, z.probs, z.logits, z.ffn, z.ids * z.tp})}, &bound);
  if (!ok) return InvalidArgument("pipecoord-cpu: the stage's sizes overflow 64-bit integers");
  CpuOpPeaks out;
  out.boundary = z.local_h;
  Timeline f, b, w, r;
  StageForward(f, z, layers, has_embedding, has_head, /*keep=*/true);
  StageBackward(b, z, layers, has_head);
  StageWeight(w, z, layers, has_embedding, has_head);
  StageForward(r, z, layers, has_embedding, has_head, /*keep=*/false);
  out.forward = f.peak();
  out.forward_end = f.level();
  out.backward = b.peak();
  out.backward_end = b.level();
  out.weight = w.peak();
  out.replay = r.peak();
  return out;
}

}  // namespace pipecoord::memory
