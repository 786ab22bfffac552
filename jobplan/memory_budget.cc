#include "jobplan/memory_budget.h"

#include <algorithm>
#include <map>

#include "memory/activations.h"
#include "memory/pipecoord_cpu.h"
#include "proto/op_kinds.h"

namespace pipecoord::jobplan {
namespace {

// The CPU backend's model and training settings for `spec`, and the recipe resolved on them.
struct CpuModel {
  memory::ModelSpec model;
  memory::TrainingSpec training;
  Result<memory::ActivationModel> activations = Internal("unresolved");
};

CpuModel Resolve(const v1::JobSpec& spec) {
  const v1::ModelSpec& m = spec.model();
  CpuModel c;
  c.model = memory::PipecoordCpuModel(m.layers(), m.hidden(), m.ffn_hidden(), m.heads(), m.vocab(),
                                      m.seq_len());
  c.training = memory::PipecoordCpuTraining(spec.micro_batch_size());
  c.activations = memory::ResolveActivations(c.model, c.training);
  return c;
}

// Only sizes past 64-bit arithmetic (far beyond any machine) fail to resolve: such a stage
// gets a budget no rank can reach rather than a wrapped-around one.
constexpr uint64_t kUnresolvable = uint64_t{1} << 56;

memory::CpuStageMemory StageMemory(const CpuModel& c, const v1::StageShard& shard) {
  if (!c.activations.ok()) {
    memory::CpuStageMemory out;
    out.parameter_bytes = out.per_microbatch.stored = out.per_microbatch.kept_for_w = kUnresolvable;
    return out;
  }
  return memory::PipecoordCpuStage(c.model, c.training, *c.activations, shard.num_layers(),
                                   shard.has_embedding(), shard.has_head());
}

SavedBytes ToSaved(const memory::CpuStageMemory& st) {
  SavedBytes b;
  b.after_f = static_cast<uint64_t>(st.per_microbatch.stored);
  b.after_b = static_cast<uint64_t>(st.per_microbatch.kept_for_w);
  return b;
}

}  // namespace

SavedBytes StageSavedBytes(const v1::JobSpec& spec, const v1::StageShard& shard) {
  return ToSaved(StageMemory(Resolve(spec), shard));
}

std::vector<RankMemoryEstimate> EstimateRankMemory(const v1::JobSpec& spec, const v1::Plan& plan) {
  const CpuModel cpu = Resolve(spec);
  std::vector<RankMemoryEstimate> out(spec.pp());
  std::map<int, SavedBytes> saved;  // by stage
  for (const v1::StageShard& shard : plan.shards()) {
    const int r = plan.stage_to_rank(shard.stage());
    if (r < 0 || r >= spec.pp()) continue;
    const memory::CpuStageMemory st = StageMemory(cpu, shard);
    out[r].parameter_bytes += static_cast<uint64_t>(st.parameter_bytes);
    saved[shard.stage()] = ToSaved(st);
  }
  for (const v1::RankJobs& jobs : plan.ranks()) {
    const int r = jobs.rank();
    if (r < 0 || r >= spec.pp()) continue;
    // The bytes of the rank's micro-batches in flight now, and the most seen after an F or a B
    // (where the backend notes its peak; W only frees).
    uint64_t now = 0, peak = 0;
    std::map<std::pair<int, int>, uint64_t> held;  // (stage, micro-batch) -> bytes
    for (const v1::Action& act : jobs.actions()) {
      const v1::Op op = act.op();
      if (!v1::IsCompute(op)) continue;
      const auto it = saved.find(act.stage());
      if (it == saved.end()) continue;
      const SavedBytes& per = it->second;
      uint64_t& mine = held[{act.stage(), act.microbatch()}];
      auto set = [&](uint64_t bytes) {
        now = now - mine + bytes;
        mine = bytes;
      };
      switch (op) {
        case v1::F:
          set(per.after_f);
          peak = std::max(peak, now);
          break;
        case v1::B:
          set(per.after_b);
          peak = std::max(peak, now);
          break;
        case v1::BW:  // B, noted, then W
          set(per.after_b);
          peak = std::max(peak, now);
          set(0);
          break;
        case v1::W:
          set(0);
          break;
        default:
          break;
      }
    }
    out[r].activation_bytes = peak;
  }
  for (RankMemoryEstimate& e : out) e.budget_bytes = e.parameter_bytes + e.activation_bytes;
  return out;
}

void FillMemoryBudgets(const v1::JobSpec& spec, v1::Plan* plan) {
  plan->clear_memory_budget_bytes();
  for (const RankMemoryEstimate& e : EstimateRankMemory(spec, *plan)) plan->add_memory_budget_bytes(e.budget_bytes);
}

}  // namespace pipecoord::jobplan
