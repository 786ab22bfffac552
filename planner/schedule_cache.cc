#include "planner/schedule_cache.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "schedules/registry.h"
#include "schedules/simulator.h"

namespace pipecoord::planner {
namespace {

using schedules::Op;

// Adds `c` to `front` unless some moment there dominates it; drops the ones it dominates.
void AddMoment(std::vector<LiveCounts>& front, LiveCounts c) {
  for (const LiveCounts& x : front) {
    if (x.stored >= c.stored && x.pending_w >= c.pending_w) return;
  }
  front.erase(std::remove_if(front.begin(), front.end(),
                             [&](const LiveCounts& x) {
                               return c.stored >= x.stored && c.pending_w >= x.pending_w;
                             }),
              front.end());
  front.push_back(c);
}

// The full build; *makespan: the simulated makespan under unit costs.
ScheduleProfile Build(const std::string& name, int pp, int vpp, int m, double* makespan) {
  ScheduleProfile p;
  p.pp = pp;
  p.vpp = vpp;
  p.microbatches = m;
  p.built_at = m;
  schedules::ScheduleSpec spec;
  spec.pp = pp;
  spec.vpp = vpp;
  spec.microbatches = m;
  // The planner prices a schedule by its bubble rate (the makespan) alone, so a searching
  // schedule whose baseline already has the least makespan is not searched for a shorter span.
  spec.least_makespan_suffices = true;
  auto s = schedules::GenerateComputeOrder(name, spec);
  if (!s.ok()) {
    p.status = s.status();
    return p;
  }
  auto sim = schedules::Simulate(*s, schedules::CostModel{});
  if (!sim.ok()) {
    p.status = sim.status();
    return p;
  }
  p.bubble_rate = sim->bubble_rate;
  *makespan = sim->makespan;
  p.stage_to_rank = s->stage_to_rank;
  p.rank_profile.resize(pp);
  for (int r = 0; r < pp; ++r) {
    LiveCounts c;
    for (const schedules::Action& a : s->ranks[r]) {
      switch (a.op) {
        case Op::kF: ++c.stored; break;
        case Op::kB: --c.stored; ++c.pending_w; break;
        case Op::kW: --c.pending_w; break;
        case Op::kBW: --c.stored; break;
        default: continue;
      }
      if (a.op == Op::kF || a.op == Op::kB) AddMoment(p.rank_profile[r], c);
    }
    // In stored order (undominated moments differ in it): two profiles compare as sets.
    std::sort(p.rank_profile[r].begin(), p.rank_profile[r].end(),
              [](const LiveCounts& a, const LiveCounts& b) { return a.stored < b.stored; });
  }
  return p;
}

}  // namespace

double MinBubbleRate(int pp, int vpp, int m) {
  if (pp <= 1 || vpp < 1 || m < 1) return 0;
  const double work = 3.0 * m;
  const double last_rank = static_cast<double>(pp - 1) / vpp + work;
  const double stage0 = 2.0 * pp + (2.0 * m - 1) / vpp;
  const double makespan = std::max(last_rank, stage0);
  return 1 - work / makespan;  // as Simulate's bubble_rate
}

ScheduleProfile ProfileScheduleAt(const std::string& name, int pp, int vpp, int m) {
  double makespan = 0;
  return Build(name, pp, vpp, m, &makespan);
}

ScheduleProfile ProfileSchedule(const std::string& name, int pp, int vpp, int m) {
  const int64_t period = 2LL * std::max(pp, 1) * std::max(vpp, 1);
  const int64_t m1 = period + (m - period) % period;  // in [period, 2 period), m1 = m mod period
  const int64_t m2 = m1 + period;
  double make = 0;
  if (m <= m2 + period) return Build(name, pp, vpp, m, &make);
  double make1 = 0, make2 = 0;
  const ScheduleProfile p1 = Build(name, pp, vpp, static_cast<int>(m1), &make1);
  ScheduleProfile p2 = Build(name, pp, vpp, static_cast<int>(m2), &make2);
  if (!p1.status.ok() || !p2.status.ok()) return Build(name, pp, vpp, m, &make);
  // Busy time grows with the micro-batches; the idle time (makespan minus a rank's work) must not.
  const double work1 = (1 - p1.bubble_rate) * make1, work2 = (1 - p2.bubble_rate) * make2;
  const double per_mb = (work2 - work1) / static_cast<double>(m2 - m1);
  const double idle1 = make1 - work1, idle2 = make2 - work2;
  const bool steady = p1.stage_to_rank == p2.stage_to_rank && p1.rank_profile == p2.rank_profile &&
                      std::abs(idle1 - idle2) <= 1e-9 * std::max(1.0, make2) &&
                      std::abs(work1 - per_mb * static_cast<double>(m1)) <= 1e-9 * std::max(1.0, make1);
  if (!steady) return Build(name, pp, vpp, m, &make);
  const double work = per_mb * m;
  p2.microbatches = m;
  p2.bubble_rate = idle2 / (work + idle2);  // 1 - work / makespan, as Simulate's
  return p2;
}

const ScheduleProfile& ScheduleCache::Get(const std::string& schedule, int pp, int vpp, int m) {
  if (!enabled_) {
    ++misses_;
    scratch_ = ProfileSchedule(schedule, pp, vpp, m);
    return scratch_;
  }
  auto key = std::make_tuple(schedule, pp, vpp, m);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = profiles_.find(key);
    if (it != profiles_.end()) {
      ++hits_;
      return it->second;
    }
    ++misses_;
  }
  ScheduleProfile built = ProfileSchedule(schedule, pp, vpp, m);  // outside the lock: it may take a second
  std::lock_guard<std::mutex> lock(mu_);
  return profiles_.try_emplace(key, std::move(built)).first->second;
}

int64_t ScheduleCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int64_t ScheduleCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

size_t ScheduleCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return profiles_.size();
}

void ScheduleCache::Prefetch(const std::vector<Key>& keys, int threads) {
  if (!enabled_) return;
  std::vector<Key> todo;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Key& k : keys) {
      if (profiles_.find(k) == profiles_.end()) todo.push_back(k);
    }
  }
  std::sort(todo.begin(), todo.end());
  todo.erase(std::unique(todo.begin(), todo.end()), todo.end());
  std::vector<ScheduleProfile> done(todo.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < todo.size(); i = next++) {
      const auto& [name, pp, vpp, m] = todo[i];
      done[i] = ProfileSchedule(name, pp, vpp, m);
    }
  };
  const int n = std::max(1, std::min<int>(threads, static_cast<int>(todo.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < todo.size(); ++i) profiles_.try_emplace(todo[i], std::move(done[i]));
  misses_ += static_cast<int64_t>(todo.size());
}

}  // namespace pipecoord::planner
