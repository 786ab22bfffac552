#include "jobplan/probe_placement.h"

#include <algorithm>
#include <cmath>

#include "jobplan/health_settings.h"
#include "jobplan/plan_expectations.h"
#include "proto/worker_kinds.h"
#include "schedules/bubble_prediction.h"

namespace pipecoord::jobplan {

namespace sch = pipecoord::schedules;

namespace {

// Where a probe for `window` goes in `list`: before the first compute action that starts at or
// after the window's end (stepping back over the receives posted for it), or at the end.
int Position(const std::vector<sch::Action>& list, const std::vector<sch::Interval>& timing,
             const sch::Interval& window, double eps) {
  int at = -1;
  for (size_t i = 0; i < list.size(); ++i) {
    if (sch::IsCompute(list[i].op) && timing[i].start >= window.end - eps) {
      at = static_cast<int>(i);
      break;
    }
  }
  if (at < 0) return static_cast<int>(list.size());
  while (at > 0 && (list[at - 1].op == sch::Op::kRecvF || list[at - 1].op == sch::Op::kRecvB)) --at;
  return at;
}

// The replay's F for a probe at pw->position (see ProbeWindow), if one fits the window; else, with
// `seeded` (dp > 1), the seeded forward of the stage the probe sits in when that fits.
void ChooseReplay(const std::vector<sch::Action>& list, const std::vector<sch::Interval>& timing, bool seeded,
                  ProbeWindow* pw) {
  const size_t at = static_cast<size_t>(pw->position);
  const double window = pw->window.end - pw->window.start;
  auto seeded_forward = [&] {
    if (!seeded || list.empty()) return;
    const int stage = list[std::min(at, list.size() - 1)].stage;
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].op != sch::Op::kF || list[i].stage != stage) continue;
      if (window >= kReplayFit * (timing[i].end - timing[i].start)) {
        pw->replay_stage = stage;
        pw->replay_mb = kSeededReplay;
      }
      return;
    }
  };
  for (size_t i = 0; i < at && i < list.size(); ++i) {
    const sch::Action& f = list[i];
    if (f.op != sch::Op::kF) continue;
    bool backward_after = false;
    for (size_t j = at; j < list.size() && !backward_after; ++j) {
      backward_after = (list[j].op == sch::Op::kB || list[j].op == sch::Op::kBW) && list[j].stage == f.stage &&
                       list[j].mb == f.mb;
    }
    if (!backward_after) continue;
    const double cost = timing[i].end - timing[i].start;
    if (window >= kReplayFit * cost) {
      pw->replay_stage = f.stage;
      pw->replay_mb = f.mb;
      return;
    }
    return seeded_forward();  // the earliest held F only; too long for the window
  }
  seeded_forward();
}

}  // namespace

std::vector<ProbeWindow> ChooseProbeWindows(const v1::JobSpec& spec, const sch::Schedule& s,
                                            const sch::Simulation& sim, bool equal_stages) {
  std::vector<std::vector<sch::Interval>> windows;
  for (const sch::RankStats& r : sim.ranks) windows.push_back(r.idle);
  bool closed = false;
  if (spec.costs().comm() == 0 && equal_stages) {
    auto pred = sch::PredictBubbles(spec.schedule(), spec.pp(), std::max(1, spec.vpp()), spec.microbatches(),
                                    spec.costs().f(), spec.costs().b(), spec.costs().w());
    if (pred.ok() && static_cast<int>(pred->windows.size()) == spec.pp()) {
      windows = pred->windows;
      closed = true;
    }
  }
  const double eps = 1e-9 * std::max(1.0, sim.makespan);
  std::vector<ProbeWindow> out;
  for (int r = 0; r < static_cast<int>(s.ranks.size()); ++r) {
    ProbeWindow pw;
    pw.rank = r;
    pw.closed_form = closed;
    double best = 0;
    // A rank the closed form places no window for (interleaved rank 0: its idle time is in
    // the unplaced middle) takes the simulator's windows.
    bool placed = false;
    for (const sch::Interval& w : windows[r]) placed |= w.end - w.start > eps;
    if (closed && !placed) pw.closed_form = false;
    for (const sch::Interval& w : (placed ? windows[r] : sim.ranks[r].idle)) {
      if (w.end - w.start > best + eps) {
        best = w.end - w.start;
        pw.window = w;
      }
    }
    if (best > eps) pw.position = Position(s.ranks[r], sim.timing[r], pw.window, eps);
    if (pw.position >= 0) ChooseReplay(s.ranks[r], sim.timing[r], spec.dp() > 1, &pw);
    out.push_back(pw);
  }
  return out;
}

Result<std::vector<ProbeWindow>> ChooseProbeWindows(const v1::JobSpec& spec, const v1::Plan& plan) {
  const sch::Schedule s = PlanSchedule(spec, plan, nullptr);
  auto sim = sch::Simulate(s, PlanCosts(spec, plan));
  if (!sim.ok()) return InvalidArgument("plan: cannot be simulated: " + sim.status().message());
  bool equal = true;
  for (const v1::StageShard& shard : plan.shards()) equal &= shard.num_layers() == plan.shards(0).num_layers();
  return ChooseProbeWindows(spec, s, *sim, equal);
}

void PlaceProbes(const v1::JobSpec& spec, const std::vector<ProbeWindow>& windows, sch::Schedule* s) {
  if (!ResolveHealth(spec.health()).probes) return;
  for (const ProbeWindow& pw : windows) {
    if (pw.position < 0) continue;
    std::vector<sch::Action>& list = s->ranks[pw.rank];
    sch::Action probe;
    probe.op = sch::Op::kProbe;
    // The stage of the action it precedes (or of the last one): the rank holds it.
    probe.stage = list.empty() ? 0 : list[std::min<size_t>(pw.position, list.size() - 1)].stage;
    probe.mb = -1;
    if (pw.replay_stage >= 0 && ResolveHealth(spec.health()).replays) {  // the F it replays, or the seeded one
      probe.stage = pw.replay_stage;
      probe.mb = pw.replay_mb;
    }
    probe.peer = -1;
    list.insert(list.begin() + pw.position, probe);
  }
}

ProbeGemm ProbeGemmFor(const v1::JobSpec& spec, bool holds_head) {
  const int64_t size = spec.health().probe_size();
  if (size > 0) return {size, size, size};
  if (spec.worker().kind() == v1::kTorchWorker) return {kTorchProbeSize, kTorchProbeSize, kTorchProbeSize};
  const v1::ModelSpec& m = spec.model();
  const int64_t tp = std::max(1, spec.tp());
  const int64_t ffn = m.ffn_hidden() != 0 ? m.ffn_hidden() : ((8 * int64_t{m.hidden()} / 3) + 63) / 64 * 64;
  ProbeGemm g;
  g.k = std::max(1, m.hidden());
  g.m = std::max<int64_t>(1, int64_t{std::max(1, spec.micro_batch_size())} * std::max(1, m.seq_len()));
  g.n = std::max<int64_t>(1, ffn / tp);
  if (holds_head) g.n = std::max<int64_t>(g.n, m.vocab() / tp);
  const int64_t most = std::max<int64_t>(1, kProbeMaxElements / g.k);
  g.m = std::min(g.m, most);
  g.n = std::min(g.n, most);
  return g;
}

bool HoldsHead(const v1::Plan& plan, int rank) {
  for (int s = 0; s < plan.shards_size() && s < plan.stage_to_rank_size(); ++s) {
    if (plan.stage_to_rank(s) == rank && plan.shards(s).has_head()) return true;
  }
  return false;
}

}  // namespace pipecoord::jobplan
