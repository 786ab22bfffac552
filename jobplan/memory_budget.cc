#include "jobplan/memory_budget.h"

#include <algorithm>
#include <map>

#include "proto/op_kinds.h"

namespace pipecoord::jobplan {

SavedBytes StageSavedBytes(const v1::JobSpec& spec, const v1::StageShard& shard) {
  const v1::ModelSpec& m = spec.model();
  const uint64_t h = m.hidden(), f = m.ffn_hidden(), a = m.heads(), s = m.seq_len(), V = m.vocab();
  const uint64_t T = static_cast<uint64_t>(spec.micro_batch_size()) * s;
  const uint64_t layers = shard.num_layers();
  SavedBytes b;
  // A block's F saves x, a, q, k, v, o, x1, c (h each), gate, up, z (f each), the attention
  // probabilities (a s) and two norms' rstd; B frees q, k, v, the probabilities, gate and up and
  // adds dy, dc, dx1, dq, dk, dv, da (h each), dgate, dup (f each).
  b.after_f = layers * T * (8 * h + 3 * f + a * s + 2) * 4;
  b.after_b = layers * T * (12 * h + 3 * f + 2) * 4;
  if (shard.has_embedding()) {
    b.after_f += T * 4;            // the token ids
    b.after_b += T * 4 + T * h * 4;  // and the gradient of the embedding's output
  }
  if (shard.has_head()) {
    b.after_f += T * (2 * h + 1 + V) * 4 + T * 4;  // x, rstd, y, logits; the targets
    b.after_b += T * (3 * h + 1 + V) * 4;          // x, rstd, y, dlogits, dy
  }
  return b;
}

std::vector<RankMemoryEstimate> EstimateRankMemory(const v1::JobSpec& spec, const v1::Plan& plan) {
  const v1::ModelSpec& m = spec.model();
  const uint64_t h = m.hidden(), f = m.ffn_hidden(), V = m.vocab();
  std::vector<RankMemoryEstimate> out(spec.pp());
  std::map<int, SavedBytes> saved;  // by stage
  for (const v1::StageShard& shard : plan.shards()) {
    const int r = plan.stage_to_rank(shard.stage());
    if (r < 0 || r >= spec.pp()) continue;
    uint64_t params = shard.num_layers() * (4 * h * h + 3 * h * f + 2 * h);
    if (shard.has_embedding()) params += V * h;
    if (shard.has_head()) params += h + V * h;
    out[r].parameter_bytes += 16 * params;
    saved[shard.stage()] = StageSavedBytes(spec, shard);
  }
  for (const v1::RankJobs& jobs : plan.ranks()) {
    const int r = jobs.rank();
    if (r < 0 || r >= spec.pp()) continue;
    // Per stage: the bytes of its micro-batches in flight now, and the most seen.
    struct Stage {
      uint64_t now = 0, peak = 0;
    };
    std::map<int, Stage> stages;
    std::map<std::pair<int, int>, uint64_t> held;  // (stage, micro-batch) -> bytes
    for (const v1::Action& act : jobs.actions()) {
      const v1::Op op = act.op();
      if (!v1::IsCompute(op)) continue;
      const auto it = saved.find(act.stage());
      if (it == saved.end()) continue;
      const SavedBytes& per = it->second;
      Stage& st = stages[act.stage()];
      uint64_t& mine = held[{act.stage(), act.microbatch()}];
      auto set = [&](uint64_t bytes) {
        st.now = st.now - mine + bytes;
        mine = bytes;
      };
      switch (op) {
        case v1::F:
          set(per.after_f);
          st.peak = std::max(st.peak, st.now);
          break;
        case v1::B:
          set(per.after_b);
          st.peak = std::max(st.peak, st.now);
          break;
        case v1::BW:  // B, noted, then W
          set(per.after_b);
          st.peak = std::max(st.peak, st.now);
          set(0);
          break;
        case v1::W:
          set(0);
          break;
        default:
          break;
      }
    }
    for (const auto& [stage, st] : stages) out[r].activation_bytes += st.peak;
  }
  for (RankMemoryEstimate& e : out) e.budget_bytes = e.parameter_bytes + e.activation_bytes;
  return out;
}

void FillMemoryBudgets(const v1::JobSpec& spec, v1::Plan* plan) {
  plan->clear_memory_budget_bytes();
  for (const RankMemoryEstimate& e : EstimateRankMemory(spec, *plan)) plan->add_memory_budget_bytes(e.budget_bytes);
}

}  // namespace pipecoord::jobplan
