#include "schedules/simulator.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "schedules/dependencies.h"
#include "schedules/validator.h"

namespace pipecoord::schedules {

std::vector<double> PeakActivations(const Schedule& s, const StageCosts& c) {
  std::vector<double> peaks(s.pp, 0.0);
  for (int r = 0; r < s.pp; ++r) {
    double live = 0, peak = 0;
    for (const Action& a : s.ranks[r]) {
      double act = c.activation[a.stage];
      switch (a.op) {
        case Op::kF: live += act; break;
        case Op::kB: live -= act * (1 - c.w_share); break;
        case Op::kW: live -= act * c.w_share; break;
        case Op::kBW: live -= act; break;
        default: break;
      }
      peak = std::max(peak, live);
    }
    peaks[r] = peak;
  }
  return peaks;
}

namespace {

// The event simulation shared by both entry points: `duration(r, i)` is the time of rank r's
// i-th action, `comm` the transfer time, `c` gives the activation sizes and the OVERLAP_F_B
// slot's length. CheckShape has run: an OVERLAP_F_B is followed by its F and a B or BW.
template <typename Duration>
Result<Simulation> Run(const Schedule& s, const Duration& duration, double comm, const StageCosts& c) {
  const int stages = s.num_stages();
  const int mbs = s.microbatches;
  const size_t plane = static_cast<size_t>(stages) * mbs;
  std::vector<double> slot_end(kNumSlots * plane, -1.0);  // -1: not produced yet

  Simulation sim;
  sim.timing.resize(s.pp);
  for (int r = 0; r < s.pp; ++r) sim.timing[r].resize(s.ranks[r].size());
  std::vector<size_t> pos(s.pp, 0);
  std::vector<double> clock(s.pp, 0.0);
  // Each rank's gradient-reduction lane: when its last REDUCE_GRAD launched so far is done.
  std::vector<double> reduced(s.pp, 0.0);
  std::vector<char> queued(s.pp, 1);
  std::vector<int> work(s.pp);
  for (int r = 0; r < s.pp; ++r) work[r] = s.pp - 1 - r;

  auto wake = [&](int stage) {
    if (stage < 0 || stage >= stages) return;
    int r = s.stage_to_rank[stage];
    if (!queued[r]) {
      queued[r] = 1;
      work.push_back(r);
    }
  };
  // Whether compute action `a` on rank r has its inputs; if so, moves *start past their arrival.
  auto inputs_ready = [&](const Action& a, int r, double* start) {
    SlotRef deps[2];
    const int n = Producers(a, stages, deps);
    for (int i = 0; i < n; ++i) {
      double e = slot_end[deps[i].slot * plane + static_cast<size_t>(deps[i].stage) * mbs + a.mb];
      if (e < 0) return false;
      if (s.stage_to_rank[deps[i].stage] != r) e += comm;
      *start = std::max(*start, e);
    }
    return true;
  };
  auto produce = [&](const Action& a, double end) {
    Slot filled[2];
    const int n = Fills(a, filled);
    for (int i = 0; i < n; ++i) slot_end[filled[i] * plane + static_cast<size_t>(a.stage) * mbs + a.mb] = end;
    if (n > 0) {  // the consumers' ranks may be waiting for this
      wake(a.stage + 1);
      wake(a.stage - 1);
    }
  };

  while (!work.empty()) {
    const int r = work.back();
    work.pop_back();
    queued[r] = 0;
    const auto& list = s.ranks[r];
    while (pos[r] < list.size()) {
      const size_t i = pos[r];
      const Action& a = list[i];
      double start = clock[r];
      if (a.op == Op::kOverlapFB) {
        // One slot: both halves start together once both have their inputs, and both results
        // are there when the slot ends (PyTorch sends them after the whole action). The slot is
        // shown split in proportion to the halves, so busy time and idle windows stay exact.
        const Action &fa = list[i + 1], &ba = list[i + 2];
        if (!inputs_ready(fa, r, &start) || !inputs_ready(ba, r, &start)) break;
        const double tf = duration(r, i + 1), tb = duration(r, i + 2);
        const double end = start + duration(r, i) + c.SlotDuration(tf, tb);
        const double split = tf + tb > 0 ? start + (end - start) * tf / (tf + tb) : start;
        sim.timing[r][i] = {start, start};
        sim.timing[r][i + 1] = {start, split};
        sim.timing[r][i + 2] = {split, end};
        clock[r] = end;
        produce(fa, end);
        produce(ba, end);
        pos[r] += 3;
        continue;
      }
      if (a.op == Op::kReduceGrad) {
        // Launched here, run in the background after the rank's earlier reductions; the rank
        // goes on at once.
        const double begin = std::max(clock[r], reduced[r]);
        reduced[r] = begin + duration(r, i);
        sim.timing[r][i] = {begin, reduced[r]};
        ++pos[r];
        continue;
      }
      if (a.op == Op::kOpt) start = std::max(start, reduced[r]);  // steps reduced gradients only
      if (IsCompute(a.op) && !inputs_ready(a, r, &start)) break;  // woken again when it is produced
      const double end = start + duration(r, i);
      sim.timing[r][i] = {start, end};
      clock[r] = end;
      produce(a, end);
      ++pos[r];
    }
  }

  std::string stuck;
  for (int r = 0; r < s.pp; ++r) {
    if (pos[r] < s.ranks[r].size()) {
      if (!stuck.empty()) stuck += "; ";
      stuck += "rank " + std::to_string(r) + " waits at position " + std::to_string(pos[r]) +
               " (" + ToString(s.ranks[r][pos[r]]) + ")";
    }
  }
  if (!stuck.empty()) {
    return FailedPrecondition("schedule cannot finish, an input is never produced: " + stuck);
  }

  const std::vector<double> peaks = PeakActivations(s, c);
  sim.ranks.resize(s.pp);
  for (int r = 0; r < s.pp; ++r) sim.makespan = std::max({sim.makespan, clock[r], reduced[r]});
  double busy_total = 0, longest_span = 0;
  const double eps = 1e-9 * std::max(1.0, sim.makespan);
  for (int r = 0; r < s.pp; ++r) {
    RankStats& st = sim.ranks[r];
    st.peak_activations = peaks[r];
    double cursor = 0;
    bool first = true;
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      if (!IsCompute(s.ranks[r][i].op)) continue;
      const Interval& t = sim.timing[r][i];
      if (first) {
        st.first_start = t.start;
        first = false;
      }
      st.last_end = t.end;
      st.busy += t.end - t.start;
      if (t.start - cursor > eps) st.idle.push_back({cursor, t.start});
      cursor = std::max(cursor, t.end);
    }
    if (sim.makespan - cursor > eps) st.idle.push_back({cursor, sim.makespan});
    busy_total += st.busy;
    longest_span = std::max(longest_span, st.last_end - st.first_start);
  }
  if (sim.makespan > 0) {
    sim.bubble_rate = 1.0 - busy_total / (s.pp * sim.makespan);
    sim.rank_span_bubble_rate = 1.0 - busy_total / (s.pp * longest_span);
  }
  return sim;
}

}  // namespace

Result<Simulation> Simulate(const Schedule& s, const CostModel& costs) {
  PIPECOORD_RETURN_IF_ERROR(CheckShape(s));
  PIPECOORD_RETURN_IF_ERROR(ValidateCostModel(costs, s.pp, s.num_stages()));
  const StageCosts c = ResolveCosts(costs, s);
  return Run(s, [&](int r, size_t i) { return c.Duration(s.ranks[r][i]); }, c.comm, c);
}

Result<Simulation> SimulateDurations(const Schedule& s, const ActionDurations& d) {
  PIPECOORD_RETURN_IF_ERROR(CheckShape(s));
  if (!std::isfinite(d.comm) || d.comm < 0) {
    return InvalidArgument("comm: must be a finite number >= 0, got " + std::to_string(d.comm));
  }
  if (d.duration.size() != s.ranks.size()) {
    return InvalidArgument("duration: expected one list per rank (" + std::to_string(s.ranks.size()) + "), got " +
                           std::to_string(d.duration.size()));
  }
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    if (d.duration[r].size() != s.ranks[r].size()) {
      return InvalidArgument("duration[" + std::to_string(r) + "]: expected one value per action (" +
                             std::to_string(s.ranks[r].size()) + "), got " + std::to_string(d.duration[r].size()));
    }
    for (size_t i = 0; i < d.duration[r].size(); ++i) {
      const double v = d.duration[r][i];
      if (!std::isfinite(v) || v < 0) {
        return InvalidArgument("duration[" + std::to_string(r) + "][" + std::to_string(i) +
                               "]: must be a finite number >= 0, got " + std::to_string(v));
      }
    }
  }
  const StageCosts c = ResolveCosts(CostModel{}, s);
  return Run(s, [&](int r, size_t i) { return d.duration[r][i]; }, d.comm, c);
}

}  // namespace pipecoord::schedules
