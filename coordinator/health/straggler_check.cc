#include "coordinator/health/straggler_check.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "common/median.h"
#include "coordinator/health/event_text.h"

namespace pipecoord::coordinator::health {
namespace {

// Per kind, each rank against the median of the other ranks' values (0 when there are none):
// one sort per kind, not a copy and a selection per rank (quadratic in ranks).
std::map<int, LeaveOneOutMedian> PeersMedians(const std::map<int, std::map<int, double>>& by_op,
                                              double (*transform)(double)) {
  std::map<int, LeaveOneOutMedian> out;
  for (const auto& [op, by_rank] : by_op) {
    std::vector<double> v;
    v.reserve(by_rank.size());
    for (const auto& [g, x] : by_rank) v.push_back(transform(x));
    out.emplace(op, LeaveOneOutMedian(std::move(v)));
  }
  return out;
}
double Same(double x) { return x; }
double NotBelowZero(double x) { return std::max(0.0, x); }

}  // namespace

StragglerCheck::StragglerCheck(const jobplan::HealthSettings& settings, const RankLayout& layout)
    : settings_(settings), layout_(layout), world_(layout.world()), flagged_(world_, false), slow_bits_(world_, 0),
      fine_(world_, 0), change_(world_) {}

void StragglerCheck::Prune(Series& s, int step) const {
  while (!s.values.empty() && s.values.front().first <= step - settings_.straggler_window) s.values.pop_front();
}

void StragglerCheck::Add(int g, int step, v1::Op op, double v, double cost) {
  if (step < settings_.warmup_steps || g < 0 || g >= world_ || !(v > 0)) return;
  Series& s = series_[{g, static_cast<int>(op)}];
  s.values.emplace_back(step, v);
  s.best = s.best == 0 ? v : std::min(s.best, v);
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

void StragglerCheck::Rebaseline(int g, int step) {
  Change& c = change_[g];
  c.baseline_paces.clear();
  c.base.clear();
  c.baseline_from = step + 1;
  c.s = 0;
  c.rising_since = -1;
}

void StragglerCheck::Cusum(int step, std::vector<v1::HealthEvent>* events) {
  // Each rank's pace of each kind: its fastest action in the window (as the scores take it: noise
  // only adds time, so one slow step among fast ones moves nothing).
  std::map<int, std::map<int, double>> pace;  // op -> rank -> seconds per cost unit
  for (const auto& [key, s] : series_) {
    for (const auto& [st, v] : s.values) {
      double& p = pace[key.second][key.first];
      p = p == 0 ? v : std::min(p, v);
    }
  }
  // Baselines being taken; then log(pace / base) of the ranks past theirs.
  std::map<int, std::map<int, double>> rel;  // op -> rank -> log(pace / base)
  for (int g = 0; g < world_; ++g) {
    Change& c = change_[g];
    if (c.baseline_from < 0) c.baseline_from = FirstScoredStep();
    if (step < c.baseline_from) continue;
    const bool past = step >= c.baseline_from + kCusumBaselineSteps;
    for (const auto& [op, by_rank] : pace) {
      auto it = by_rank.find(g);
      if (it == by_rank.end()) continue;
      if (!past) {
        c.baseline_paces[op].push_back(it->second);
      } else if (auto b = c.base.find(op); b != c.base.end() && b->second > 0) {
        rel[op][g] = std::log(it->second / b->second);
        // Noise only adds time: the baseline follows the rank's fastest pace since it was taken.
        b->second = std::min(b->second, it->second);
      }
    }
    if (step == c.baseline_from + kCusumBaselineSteps - 1) {
      for (auto& [op, v] : c.baseline_paces) c.base[op] = *std::min_element(v.begin(), v.end());
      c.baseline_paces.clear();
    }
  }
  const std::map<int, LeaveOneOutMedian> peers_rel = PeersMedians(rel, NotBelowZero);
  for (int g = 0; g < world_; ++g) {
    Change& c = change_[g];
    if (flagged_[g] || step < c.baseline_from + kCusumBaselineSteps) continue;
    double x = std::numeric_limits<double>::infinity();
    std::string detail;
    double excess_s = 0;  // seconds a step the rank lost to the slowdown, over its kinds
    for (const auto& [op, by_rank] : rel) {
      auto it = by_rank.find(g);
      if (it == by_rank.end()) continue;
      if (by_rank.size() < 2) continue;  // no other rank runs this kind
      const double peer = peers_rel.at(op).Without(NotBelowZero(it->second));
      x = std::min(x, it->second - peer);
      const double base = c.base[op];
      const double now = pace[op][g];
      const Series& series = series_[{g, op}];
      std::vector<int> steps;
      for (const auto& [st, v] : series.values) steps.push_back(st);
      steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
      const double actions_per_step = steps.empty() ? 0 : static_cast<double>(series.values.size()) / steps.size();
      excess_s += (now - base * std::exp(peer)) * series.mean_cost() * actions_per_step;
      detail += Format("%s%s %.3f vs its baseline %.3f ms, the others x%.2f", detail.empty() ? "" : ", ",
                       v1::Op_Name(static_cast<v1::Op>(op)).c_str(), now * 1e3, base * 1e3, std::exp(peer));
    }
    if (!std::isfinite(x)) continue;  // no kind with peers
    const double before = c.s;
    // One step's evidence is capped (a winsorized CUSUM): a single slow window, however slow,
    // cannot reach the limit alone; that takes three steps at 1.5x or more.
    c.s = std::max(0.0, c.s + std::min(x, kCusumStepCap) - kCusumDrift);
    if (before == 0 && c.s > 0) c.rising_since = step;
    // The floor per step here, not per action: a lasting slowdown adds up over a step's actions.
    if (c.s <= kCusumLimit || excess_s < settings_.straggler_min_delta_s) continue;
    const std::string msg = Format(
        "straggler: %s at step %d: slower than its own baseline in every kind of action since step %d while the "
        "other ranks are not: a lasting change (cumulative log-slowdown %.3f > %.3f; fastest action per cost unit "
        "in the last %d steps: %s)",
        layout_.Name(g).c_str(), step, c.rising_since, c.s, kCusumLimit, settings_.straggler_window, detail.c_str());
    events->push_back(MakeEvent(v1::STRAGGLER, g, layout_, step, msg));
    flagged_[g] = true;
    fine_[g] = 0;
    for (auto& [key, s] : series_) {
      if (key.first == g && !s.values.empty()) {
        double recent = s.values.front().second;
        for (const auto& [st, v] : s.values) recent = std::min(recent, v);
        s.flagged_pace = recent;
      }
    }
    Rebaseline(g, step);
  }
}

std::vector<v1::HealthEvent> StragglerCheck::Evaluate(int step) {
  scores_.clear();
  std::vector<v1::HealthEvent> events;
  if (step < settings_.warmup_steps) return events;
  // Per kind: each rank's best and drift, for the peers' medians.
  std::map<int, std::map<int, double>> best, drift;  // op -> rank -> value
  for (auto& [key, s] : series_) {
    Prune(s, step);
    if (s.values.empty()) continue;
    StragglerScore sc;
    sc.global_rank = key.first;
    sc.op = static_cast<v1::Op>(key.second);
    std::vector<double> v;
    sc.recent = s.values.front().second;
    for (const auto& [st, x] : s.values) {
      v.push_back(x);
      sc.recent = std::min(sc.recent, x);
    }
    sc.median = Median(std::move(v));
    sc.best = s.best;
    sc.mean_cost = s.mean_cost();
    best[key.second][key.first] = sc.best;
    // A rank already flagged drifts from its pace when it was flagged, not from its best: its
    // own slowness is no drift of the machine, and what it does since is (clamped at 1: its
    // recovery is no sign that the machine sped up).
    drift[key.second][key.first] = flagged_[key.first] && s.flagged_pace > 0
                                       ? std::max(1.0, sc.recent / s.flagged_pace)
                                       : sc.recent / sc.best;
    scores_.push_back(sc);
  }
  // Per rank and kind, the two scores, and whether the kind is slow beyond the absolute floor.
  const double thr = settings_.straggler_threshold;
  struct RankView {
    bool any = false;                       // a kind with peers to compare with
    bool rel_slow = true, ind_slow = true;  // every such kind under the threshold
    double relative = 0, individual = 0;    // the highest over the kinds
    std::vector<const StragglerScore*> kinds;
    std::vector<double> peers_best, peers_drift;
  };
  std::vector<RankView> ranks(world_);
  const std::map<int, LeaveOneOutMedian> peers_best = PeersMedians(best, Same), peers_drift = PeersMedians(drift, Same);
  for (StragglerScore& sc : scores_) {
    const int op = static_cast<int>(sc.op);
    const double pb = peers_best.at(op).Without(best[op][sc.global_rank]);
    const double pd = peers_drift.at(op).Without(drift[op][sc.global_rank]);
    if (pb <= 0) continue;  // no other rank runs this kind
    const double d = sc.recent / sc.best;
    sc.relative = std::min(1.0, pb / sc.best);
    sc.individual = pd > 0 ? std::min(1.0, pd / d) : 1.0;
    RankView& r = ranks[sc.global_rank];
    r.any = true;
    const double min_delta = settings_.straggler_min_delta_s;
    r.rel_slow = r.rel_slow && sc.relative < thr && (sc.best - pb) * sc.mean_cost >= min_delta;
    r.ind_slow = r.ind_slow && sc.individual < thr && (sc.recent - sc.best * pd) * sc.mean_cost >= min_delta;
    r.relative = std::max(r.relative, sc.relative);
    r.individual = std::max(r.individual, sc.individual);
    r.kinds.push_back(&sc);
    r.peers_best.push_back(pb);
    r.peers_drift.push_back(pd);
  }
  if (step < FirstScoredStep()) return events;
  for (int g = 0; g < world_; ++g) {
    const RankView& r = ranks[g];
    const bool slow = r.any && (r.rel_slow || r.ind_slow);
    slow_bits_[g] = ((slow_bits_[g] << 1) | (slow ? 1u : 0u)) & ((1u << kStragglerLookback) - 1);
    fine_[g] = slow ? 0 : fine_[g] + 1;
    const int slow_steps = std::popcount(slow_bits_[g]);
    if (flagged_[g]) {
      if (fine_[g] > settings_.straggler_window) {  // the episode is over
        flagged_[g] = false;
        for (auto& [key, s] : series_) {
          if (key.first == g) s.flagged_pace = 0;
        }
      }
      continue;
    }
    if (slow && slow_steps >= kStragglerPersistence) {
      std::string detail;
      for (size_t k = 0; k < r.kinds.size(); ++k) {
        const StragglerScore& sc = *r.kinds[k];
        const std::string op = v1::Op_Name(sc.op);
        detail += k ? ", " : "";
        detail += r.rel_slow ? Format("%s %.3f vs %.3f ms", op.c_str(), sc.best * 1e3, r.peers_best[k] * 1e3)
                             : Format("%s %.3f vs its best %.3f ms, the others x%.2f", op.c_str(), sc.recent * 1e3,
                                      sc.best * 1e3, r.peers_drift[k]);
      }
      const std::string msg =
          r.rel_slow
              ? Format("straggler: %s at step %d: slower than the other ranks in every kind of action in %d of "
                       "the last %d steps: relative score %.3f < %g (fastest action per cost unit: %s, the others' "
                       "median)",
                       layout_.Name(g).c_str(), step, slow_steps, kStragglerLookback, r.relative, thr, detail.c_str())
              : Format("straggler: %s at step %d: slower than its own baseline in every kind of action in %d of the "
                       "last %d steps while the other ranks are not: individual score %.3f < %g (fastest action per "
                       "cost unit in the last %d steps: %s)",
                       layout_.Name(g).c_str(), step, slow_steps, kStragglerLookback, r.individual, thr,
                       settings_.straggler_window, detail.c_str());
      events.push_back(MakeEvent(v1::STRAGGLER, g, layout_, step, msg));
      flagged_[g] = true;
      for (const StragglerScore* sc : r.kinds) series_[{g, static_cast<int>(sc->op)}].flagged_pace = sc->recent;
      Rebaseline(g, step);
    }
  }
  Cusum(step, &events);
  return events;
}

}  // namespace pipecoord::coordinator::health
