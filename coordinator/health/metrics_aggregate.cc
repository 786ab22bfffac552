#include "coordinator/health/metrics_aggregate.h"

#include <algorithm>

namespace pipecoord::coordinator::health {

PipelineRankAggregate::PipelineRankAggregate(const RankLayout& layout, std::string job_id, MetricsSink* sink)
    : layout_(layout), job_(std::move(job_id)), sink_(sink), per_rank_(PerRankSeries(layout)) {
  if (!per_rank_) memory_.resize(layout.pp());
}

void PipelineRankAggregate::Memory(int g, int step, uint64_t peak_bytes, uint64_t budget_bytes,
                                   uint64_t reserved_bytes) {
  if (sink_ == nullptr || !layout_.Contains(g)) return;
  if (per_rank_) {
    sink_->Memory(job_, LabelOf(layout_, g), peak_bytes, budget_bytes, reserved_bytes);
    return;
  }
  const int rank = layout_.PipelineRank(g);
  WorstMemory& w = memory_[rank];
  if (step < w.step) return;
  if (step > w.step) {
    w = {step, peak_bytes, reserved_bytes};
  } else {
    w.peak = std::max(w.peak, peak_bytes);
    w.reserved = std::max(w.reserved, reserved_bytes);
  }
  sink_->Memory(job_, PipelineRankLabel(rank), w.peak, budget_bytes, w.reserved);
}

void PipelineRankAggregate::AddIdle(const RankLabel& at, double inherent, double imbalance, double variation,
                                    double comm) {
  if (sink_ == nullptr) return;
  if (per_rank_) {
    sink_->Idle(job_, at, inherent, imbalance, variation, comm);
    return;
  }
  IdleSum& s = idle_[at.rank];
  s.inherent += inherent;
  s.imbalance += imbalance;
  s.variation += variation;
  s.comm += comm;
  ++s.n;
}

void PipelineRankAggregate::FlushIdle() {
  for (const auto& [rank, s] : idle_) {
    sink_->Idle(job_, PipelineRankLabel(rank), s.inherent / s.n, s.imbalance / s.n, s.variation / s.n, s.comm / s.n);
  }
  idle_.clear();
}

void PipelineRankAggregate::AddStraggler(int g, const std::string& op, double relative, double individual) {
  if (sink_ == nullptr || !layout_.Contains(g)) return;
  if (per_rank_) {
    sink_->Straggler(job_, LabelOf(layout_, g), op, relative, individual);
    return;
  }
  const auto [it, fresh] = straggler_.try_emplace({layout_.PipelineRank(g), op}, relative, individual);
  if (!fresh) {
    it->second.first = std::min(it->second.first, relative);
    it->second.second = std::min(it->second.second, individual);
  }
}

void PipelineRankAggregate::FlushStraggler() {
  for (const auto& [key, scores] : straggler_) {
    sink_->Straggler(job_, PipelineRankLabel(key.first), key.second, scores.first, scores.second);
  }
  straggler_.clear();
}

}  // namespace pipecoord::coordinator::health
