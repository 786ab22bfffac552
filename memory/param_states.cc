#include "memory/param_states.h"

namespace pipecoord::memory {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

ParamCounts CountParams(const ModelSpec& m, int tp) {
  const int64_t h = m.hidden, f = m.ffn, t = tp;
  const int64_t kv = 2 * m.kv_heads * m.HeadDim();  // k and v projection widths together
  const int64_t q = m.QWidth();                      // q and o: h unless the model gives head_dim
  const int64_t norm = m.norm == Norm::kRmsNorm ? h : 2 * h;
  const int64_t fc1 = m.mlp == Mlp::kSwiGlu ? 2 * f : f;  // gate and up, or fc1
  ParamCounts c;
  int64_t block = 2 * norm;
  block += h * (q + kv) / t + h * q / t;  // QKV (column-parallel), output projection (row)
  block += fc1 * h / t + f * h / t;       // fc1 / gate+up (column), fc2 / down (row)
  if (m.linear_bias) {
    block += (q + kv) / t + h + fc1 / t + h;
  } else if (m.qkv_bias) {
    block += (q + kv) / t;
  }
  c.per_block = block;
  c.embedding = CeilDiv(m.vocab, t) * h;
  c.positions = m.learned_positions * h;
  c.final_norm = norm;
  c.lm_head = CeilDiv(m.vocab, t) * h;  // a copy when tied and on another rank: see estimate.cc
  return c;
}

int64_t TotalParams(const ModelSpec& m) {
  ParamCounts c = CountParams(m, 1);
  return c.per_block * m.layers + c.embedding + c.positions + c.final_norm +
         (m.tied_embeddings ? 0 : c.lm_head);
}

StateBytes ParamStateBytes(int64_t n, const TrainingSpec& t) {
  const bool mixed = t.dtype != DtypePolicy::kFp32;
  const int64_t d = t.dp;
  const int64_t shard = CeilDiv(n, d);
  StateBytes s;
  s.params = (t.zero >= 3 ? shard : n) * ActivationBytes(t.dtype);
  s.grads = (t.zero >= 2 ? shard : n) * ((mixed && !t.fp32_grads) ? 2 : 4);
  const int64_t opt_n = t.zero >= 1 ? shard : n;
  s.master = mixed ? opt_n * 4 : 0;
  s.grad_copy = (mixed && !t.fp32_grads) ? opt_n * 4 : 0;
  s.optimizer = opt_n * (t.optimizer == Optimizer::kAdamW ? 8 : 4);
  return s;
}

}  // namespace pipecoord::memory
