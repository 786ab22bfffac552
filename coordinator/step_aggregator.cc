#include "coordinator/step_aggregator.h"

#include <algorithm>

#include "proto/op_kinds.h"

namespace pipecoord::coordinator {
namespace {

// In global rank order (the map's): deterministic whatever order the reports came in.
double Mean(const std::map<int, double>& by_rank) {
  if (by_rank.empty()) return 0;
  double sum = 0;
  for (const auto& [g, v] : by_rank) sum += v;
  return sum / static_cast<double>(by_rank.size());
}

}  // namespace

StepAggregator::Step& StepAggregator::At(int step) {
  Step& acc = steps_[step];
  if (acc.timed.empty()) {
    acc.actions.resize(world_);
    acc.busy_ns.assign(world_, 0);
    acc.timed.assign(world_, 0);
    acc.folded.assign(world_, 0);
  }
  return acc;
}

std::vector<v1::StepRecord> StepAggregator::Add(int g, const v1::TelemetryBatch& b,
                                                std::vector<jobplan::StepActions>* actions) {
  const bool in_world = g >= 0 && g < world_;
  for (const v1::ActionTiming& t : b.actions()) {
    Step& acc = At(t.step());
    acc.min_start = std::min(acc.min_start, t.start_ns());
    acc.max_end = std::max(acc.max_end, t.end_ns());
    if (!in_world) continue;
    acc.actions[g].push_back(t);
    acc.timed[g] = 1;
    if (v1::IsCompute(t.action().op())) acc.busy_ns[g] += static_cast<double>(t.end_ns() - t.start_ns());
  }
  for (const v1::ActionTotals& k : b.totals()) {
    Step& acc = At(k.step());
    acc.min_start = std::min(acc.min_start, k.first_start_ns());
    acc.max_end = std::max(acc.max_end, k.last_end_ns());
    if (!in_world) continue;
    acc.timed[g] = 1;
    acc.folded[g] = 1;
    if (v1::IsCompute(k.op())) acc.busy_ns[g] += static_cast<double>(k.busy_ns());
  }
  std::vector<v1::StepRecord> done;
  for (const v1::StepSummary& s : b.steps()) {
    Step& acc = At(s.step());
    acc.peaks.resize(world_, 0);
    acc.peaks[g] = s.memory_peak_bytes();
    if (s.has_loss()) acc.losses[g] = s.loss();
    if (s.has_val_loss()) acc.val_losses[g] = s.val_loss();
    // Every rank reports the same norm and learning rate (one all-reduce); keep one.
    if (s.has_grad_norm()) {
      acc.grad_norm = s.grad_norm();
      acc.has_grad_norm = true;
    }
    acc.learning_rate = std::max(acc.learning_rate, s.learning_rate());
    if (++acc.reports < world_) continue;
    // Every rank has reported this step: measure it.
    v1::StepRecord& rec = done.emplace_back();
    rec.set_step(s.step());
    rec.set_loss(Mean(acc.losses));
    if (!acc.val_losses.empty()) {
      rec.set_val_loss(Mean(acc.val_losses));
      rec.set_has_val_loss(true);
    }
    if (acc.has_grad_norm) {
      rec.set_grad_norm(acc.grad_norm);
      rec.set_has_grad_norm(true);
    }
    rec.set_learning_rate(acc.learning_rate);
    // A silent rank of a speaker group counts as its group's first rank (lockstep).
    bool every_rank_timed = true;
    int whole_ranks = 0;  // from global rank 0 on, ranks whose actions came whole
    double busy_ns = 0;
    for (int r = 0; r < world_; ++r) {
      const int from = acc.timed[r] ? r : r - r % speaker_group_;
      every_rank_timed = every_rank_timed && acc.timed[from];
      if (whole_ranks == r && acc.timed[from] && !acc.folded[from]) ++whole_ranks;
      busy_ns += acc.busy_ns[from];
      if (from != r) acc.actions[r] = acc.actions[from];
    }
    const double span = acc.max_end > acc.min_start ? (acc.max_end - acc.min_start) * 1e-9 : 0;
    rec.set_step_time_s(span);
    rec.set_measured_bubble_rate(span > 0 ? 1.0 - busy_ns * 1e-9 / (world_ * span) : 0);
    for (uint64_t p : acc.peaks) rec.add_peak_memory_bytes(p);
    if (actions != nullptr) {
      // Every rank whole, or a rank missing: each rank's as reported. Else the first replica's
      // when it came whole, or none (measured, not calibrated on).
      if (whole_ranks < world_ && every_rank_timed) acc.actions.resize(whole_ranks >= replica_ ? replica_ : 0);
      actions->push_back(std::move(acc.actions));
    }
    steps_.erase(s.step());
  }
  return done;
}

}  // namespace pipecoord::coordinator
