#include "coordinator/health/memory_budget.h"

#include <cmath>

#include "coordinator/health/plan_expectations.h"
#include "schedules/cost_model.h"
#include "schedules/simulator.h"

namespace pipecoord::coordinator::health {

std::vector<RankMemoryEstimate> EstimateRankMemory(const v1::JobSpec& spec, const v1::Plan& plan) {
  const v1::ModelSpec& m = spec.model();
  const uint64_t h = m.hidden(), f = m.ffn_hidden(), a = m.heads(), s = m.seq_len(), V = m.vocab();
  const uint64_t tokens = static_cast<uint64_t>(spec.micro_batch_size()) * s;
  std::vector<RankMemoryEstimate> out(spec.pp());
  for (const v1::StageShard& shard : plan.shards()) {
    const int r = plan.stage_to_rank(shard.stage());
    uint64_t params = shard.num_layers() * (4 * h * h + 3 * h * f + 2 * h);
    uint64_t act = shard.num_layers() * tokens * (12 * h + 3 * f + a * s + 2) * 4;
    if (shard.has_embedding()) {
      params += V * h;
      act += tokens * (4 + 4 * h);
    }
    if (shard.has_head()) {
      params += h + V * h;
      act += tokens * ((3 * h + 2 * V + 2) * 4 + 4);
    }
    out[r].parameter_bytes += 16 * params;
    out[r].microbatch_bytes += act;
  }
  const schedules::Schedule sched = PlanSchedule(spec, plan, nullptr);
  const std::vector<double> peaks =
      schedules::PeakActivations(sched, schedules::ResolveCosts(PlanCosts(spec, plan), sched));
  for (int r = 0; r < spec.pp(); ++r) {
    out[r].peak_microbatches = r < static_cast<int>(peaks.size()) ? static_cast<int>(std::ceil(peaks[r] - 1e-9)) : 0;
    const double total = static_cast<double>(out[r].parameter_bytes) +
                         static_cast<double>(out[r].peak_microbatches) * out[r].microbatch_bytes;
    out[r].budget_bytes = static_cast<uint64_t>(std::ceil(total * (1 + kBudgetHeadroom)));
  }
  return out;
}

void FillMemoryBudgets(const v1::JobSpec& spec, v1::Plan* plan) {
  plan->clear_memory_budget_bytes();
  for (const RankMemoryEstimate& e : EstimateRankMemory(spec, *plan)) plan->add_memory_budget_bytes(e.budget_bytes);
}

}  // namespace pipecoord::coordinator::health
