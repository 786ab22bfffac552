#include "planner/step_time.h"

#include "memory/param_states.h"

namespace pipecoord::planner {

using memory::ModelSpec;
using memory::Recompute;

BlockFlops ForwardBlockFlops(const ModelSpec& m, int b, int tp) {
  const double tokens = static_cast<double>(m.seq_len) * b;
  const double h = static_cast<double>(m.hidden);
  const double kv = 2.0 * m.kv_heads * m.HeadDim();
  const double q = static_cast<double>(m.QWidth());  // h unless the model gives head_dim
  const double fc1 = m.mlp == memory::Mlp::kSwiGlu ? 2.0 * m.ffn : static_cast<double>(m.ffn);
  BlockFlops f;
  f.linear = 2 * tokens * h * (q + kv) + 2 * tokens * q * h + 2 * tokens * h * fc1 + 2 * tokens * m.ffn * h;
  f.core = 4 * tokens * static_cast<double>(m.seq_len) * q;  // QK^T and PV over a heads of d
  f.linear /= tp;
  f.core /= tp;
  return f;
}

double ForwardHeadFlops(const ModelSpec& m, int b, int tp) {
  return 2.0 * m.seq_len * b * static_cast<double>(m.hidden) * m.vocab / tp;
}

namespace {

// A rank's compute and TP communication for the step's micro-batches: `layers` blocks, and the LM
// head when `head`.
void RankWork(const ModelSpec& m, const ClusterSpec& c, const StrategyShape& s, int layers, bool head_here,
              double* compute_s, double* tp_comm_s) {
  const double rate = c.peak_flops * c.efficiency;
  const BlockFlops blk = ForwardBlockFlops(m, s.micro_batch, s.tp);
  const double fwd = blk.linear + blk.core;
  // B: the input gradients of the linear layers (as many FLOPs as forward) and of the attention
  // core (twice its forward); W: the weight gradients (as many as the linear forward).
  double f_layer = fwd, b_layer = blk.linear + 2 * blk.core, w_layer = blk.linear;
  if (s.recompute == Recompute::kFull) b_layer += fwd;
  if (s.recompute == Recompute::kSelective) b_layer += blk.core;
  const double head = head_here ? ForwardHeadFlops(m, s.micro_batch, s.tp) : 0;
  const double per_mb_flops = layers * (f_layer + b_layer + w_layer) + 3 * head;
  *compute_s = s.microbatches * per_mb_flops / rate;
  *tp_comm_s = 0;
  if (s.tp > 1) {
    const int act_bytes = memory::ActivationBytes(s.dtype);
    const double hidden_bytes = static_cast<double>(m.seq_len) * s.micro_batch * m.hidden * act_bytes;
    const double bw = s.tp <= c.gpus_per_node ? c.intra_node_bandwidth : c.inter_node_bandwidth;
    // Two all-reduces in forward and two in backward per block (two more when full recompute
    // replays the forward); with SP each is an all-gather plus a reduce-scatter: same volume.
    const int collectives = 4 + (s.recompute == Recompute::kFull ? 2 : 0);
    const double one = 2.0 * (s.tp - 1) / s.tp * hidden_bytes / bw + 2 * (s.tp - 1) * c.link_latency_s;
    *tp_comm_s = s.microbatches * layers * collectives * one;
  }
}

}  // namespace

double RankPipelineSeconds(const ModelSpec& m, const ClusterSpec& c, const StrategyShape& s, int layers, bool head) {
  double compute = 0, tp = 0;
  RankWork(m, c, s, layers, head, &compute, &tp);
  return compute + tp;
}

StepTime EstimateStepTime(const ModelSpec& m, const ClusterSpec& c, const StrategyShape& s) {
  StepTime t;
  RankWork(m, c, s, s.bottleneck_layers, s.bottleneck_has_head, &t.compute_s, &t.tp_comm_s);
  const int act_bytes = memory::ActivationBytes(s.dtype);
  const double hidden_bytes = static_cast<double>(m.seq_len) * s.micro_batch * m.hidden * act_bytes;
  const double pipeline = t.compute_s + t.tp_comm_s;
  const double rate_kept = s.bubble_rate < 0.99 ? s.bubble_rate : 0.99;
  t.bubble_s = pipeline * rate_kept / (1 - rate_kept);

  if (s.pp > 1) {
    const bool pp_in_node = static_cast<int64_t>(s.tp) * s.dp < c.gpus_per_node;
    const double bw = pp_in_node ? c.intra_node_bandwidth : c.inter_node_bandwidth;
    const double msg = hidden_bytes / (s.sp ? s.tp : 1);
    // Forward and backward each cross pp x vpp - 1 stage boundaries on the critical path.
    t.pp_comm_s = 2.0 * (s.pp * s.vpp - 1) * (msg / bw + c.link_latency_s);
  }

  // Gradients travel as the fp32 buffers they accumulate in (the memory model's default).
  const double grad_bytes = static_cast<double>(s.params_per_rank) * 4;
  const double param_bytes = static_cast<double>(s.params_per_rank) * act_bytes;
  if (s.dp > 1) {
    const bool dp_in_node = static_cast<int64_t>(s.tp) * s.dp <= c.gpus_per_node;
    const double bw = dp_in_node ? c.intra_node_bandwidth : c.inter_node_bandwidth;
    const double share = static_cast<double>(s.dp - 1) / s.dp;
    const double lat = 2.0 * (s.dp - 1) * c.link_latency_s;
    if (s.zero == 0) {
      t.dp_comm_s = 2 * share * grad_bytes / bw + lat;  // all-reduce after accumulation
    } else if (s.zero <= 2) {
      t.dp_comm_s = share * grad_bytes / bw + share * param_bytes / bw + lat;  // RS + AG
    } else {
      // ZeRO-3 gathers the weights for every micro-batch's forward and backward.
      t.dp_comm_s = share * grad_bytes / bw + 2.0 * s.microbatches * share * param_bytes / bw +
                    (2.0 * s.microbatches + 1) * lat;
    }
  }
  // AdamW reads and writes master weights, two moments and the gradient shard, and writes the
  // 16-bit weights (about 16 + 16 + 2 bytes per parameter of the shard).
  const double shard = s.zero >= 1 ? static_cast<double>(s.params_per_rank) / s.dp : s.params_per_rank;
  t.optimizer_s = shard * 34.0 / c.memory_bandwidth;
  t.total_s = pipeline + t.bubble_s + t.pp_comm_s + t.dp_comm_s + t.optimizer_s;

  // Forward, B and W without recompute: the linear layers three times, the core once in forward
  // and twice in B, the head three times.
  const BlockFlops whole = ForwardBlockFlops(m, s.micro_batch, 1);
  const double useful =
      m.layers * (3 * whole.linear + 3 * whole.core) + 3 * ForwardHeadFlops(m, s.micro_batch, 1);
  t.model_flops = useful * s.microbatches * s.dp;
  return t;
}

}  // namespace pipecoord::planner
