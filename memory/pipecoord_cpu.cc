#include "memory/pipecoord_cpu.h"

#include "memory/param_states.h"

namespace pipecoord::memory {

ModelSpec PipecoordCpuModel(int layers, int64_t hidden, int64_t ffn, int64_t heads, int64_t vocab,
                            int64_t seq_len) {
  ModelSpec m;
  m.name = "pipecoord-cpu";
  m.layers = layers;
  m.hidden = hidden;
  m.ffn = ffn;
  m.heads = heads;
  m.kv_heads = heads;
  m.vocab = vocab;
  m.seq_len = seq_len;
  m.tied_embeddings = false;
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
    out.parameters += c.final_norm + c.lm_head;
    out.per_microbatch.stored += am.last.stored_bytes;
    out.per_microbatch.kept_for_w += am.last.w_bytes;
  }
  out.parameter_bytes = ParamStateBytes(out.parameters, training).total();
  return out;
}

}  // namespace pipecoord::memory
