#include "coordinator/health/straggler_check.h"

#include <algorithm>
#include <set>

#include "common/median.h"
#include "coordinator/health/event_text.h"

namespace pipecoord::coordinator::health {

StragglerCheck::StragglerCheck(const jobplan::HealthSettings& settings, int pp, int world)
    : settings_(settings), pp_(pp), world_(world), flagged_(world, false), relative_low_(world, 0),
      individual_low_(world, 0) {}

void StragglerCheck::Prune(Series& s, int step) const {
  while (!s.values.empty() && s.values.front().first <= step - settings_.straggler_window) s.values.pop_front();
}

void StragglerCheck::Add(int g, int step, v1::Op op, double v, double cost) {
  if (step < settings_.warmup_steps || g < 0 || g >= world_ || !(v > 0)) return;
  Series& s = series_[{g, static_cast<int>(op)}];
  s.values.emplace_back(step, v);
  s.cost_sum += cost;
  ++s.cost_count;
  latest_step_ = std::max(latest_step_, step);
  Prune(s, latest_step_);
}

double StragglerCheck::FastestMedian() const {
  std::map<int, std::vector<double>> by_rank;
  for (const auto& [key, s] : series_) {
    for (const auto& [step, v] : s.values) by_rank[key.first].push_back(v);
  }
  double fastest = 0;
  for (auto& [g, values] : by_rank) {
    const double m = Median(std::move(values));
    if (fastest == 0 || m < fastest) fastest = m;
  }
  return fastest;
}

std::vector<v1::HealthEvent> StragglerCheck::Evaluate(int step) {
  scores_.clear();
  std::vector<v1::HealthEvent> events;
  if (step < settings_.warmup_steps) return events;
  // Medians first, then the fastest per kind.
  std::map<int, double> fastest;        // op -> lowest median
  std::map<int, int> fastest_rank;      // op -> its rank
  for (auto& [key, s] : series_) {
    Prune(s, step);
    if (s.values.empty()) continue;
    std::vector<double> v;
    std::set<int> steps;
    for (const auto& [st, x] : s.values) {
      v.push_back(x);
      steps.insert(st);
    }
    StragglerScore sc;
    sc.global_rank = key.first;
    sc.op = static_cast<v1::Op>(key.second);
    sc.median = Median(std::move(v));
    if (static_cast<int>(steps.size()) >= settings_.straggler_window &&
        (s.best_at < 0 || step - s.best_at >= settings_.straggler_window)) {
      s.best = s.best == 0 ? sc.median : std::min(s.best, sc.median);
      s.best_at = step;
    }
    sc.individual = s.best > 0 ? std::min(1.0, s.best / sc.median) : 1.0;
    sc.best = s.best;
    sc.mean_cost = s.mean_cost();
    auto it = fastest.find(key.second);
    if (it == fastest.end() || sc.median < it->second) {
      fastest[key.second] = sc.median;
      fastest_rank[key.second] = key.first;
    }
    scores_.push_back(sc);
  }
  // Per rank, its lowest relative and lowest individual score over the kinds.
  std::vector<const StragglerScore*> worst_rel(world_, nullptr), worst_ind(world_, nullptr);
  for (StragglerScore& sc : scores_) {
    sc.relative = fastest[static_cast<int>(sc.op)] / sc.median;
    const int g = sc.global_rank;
    if (worst_rel[g] == nullptr || sc.relative < worst_rel[g]->relative) worst_rel[g] = &sc;
    if (worst_ind[g] == nullptr || sc.individual < worst_ind[g]->individual) worst_ind[g] = &sc;
  }
  std::vector<const StragglerScore*> worst(world_, nullptr);
  std::vector<bool> relative_worst(world_, false);
  for (int g = 0; g < world_; ++g) {
    if (worst_rel[g] == nullptr) continue;
    const double thr = settings_.straggler_threshold;
    const StragglerScore& r = *worst_rel[g];
    const StragglerScore& i = *worst_ind[g];
    const double min_delta = settings_.straggler_min_delta_s;
    const bool rel_low = r.relative < thr && (r.median - fastest[static_cast<int>(r.op)]) * r.mean_cost >= min_delta;
    const bool ind_low = i.individual < thr && (i.median - i.best) * i.mean_cost >= min_delta;
    relative_low_[g] = rel_low ? relative_low_[g] + 1 : 0;
    individual_low_[g] = ind_low ? individual_low_[g] + 1 : 0;
    const bool rel = relative_low_[g] >= kRelativePersistence;
    const bool ind = individual_low_[g] >= settings_.straggler_window;
    if (rel) {
      worst[g] = worst_rel[g];
      relative_worst[g] = true;
    } else if (ind) {
      worst[g] = worst_ind[g];
    }
  }
  for (int g = 0; g < world_; ++g) {
    if (worst_rel[g] == nullptr) continue;
    const bool under = worst[g] != nullptr;
    if (under && !flagged_[g]) {
      const StragglerScore& sc = *worst[g];
      const std::string op = v1::Op_Name(sc.op);
      std::string msg;
      if (relative_worst[g]) {
        const int f = fastest_rank[static_cast<int>(sc.op)];
        msg = Format("straggler: %s at step %d: %s relative score %.3f < %g (median %.3f ms per cost unit, the fastest %s %.3f ms)",
                     RankName(g, pp_).c_str(), step, op.c_str(), sc.relative, settings_.straggler_threshold,
                     sc.median * 1e3, RankName(f, pp_).c_str(), fastest[static_cast<int>(sc.op)] * 1e3);
      } else {
        const Series& s = series_[{g, static_cast<int>(sc.op)}];
        msg = Format("straggler: %s at step %d: %s individual score %.3f < %g (median %.3f ms per cost unit, its best %.3f ms)",
                     RankName(g, pp_).c_str(), step, op.c_str(), sc.individual, settings_.straggler_threshold,
                     sc.median * 1e3, s.best * 1e3);
      }
      events.push_back(MakeEvent(v1::STRAGGLER, g, pp_, step, msg));
    }
    flagged_[g] = under;
  }
  return events;
}

}  // namespace pipecoord::coordinator::health
