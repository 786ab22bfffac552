#include "jobplan/probe_placement.h"

#include <cmath>

#include "jobplan/plan_expectations.h"
#include "jobplan/health_settings.h"
#include "schedules/bubble_prediction.h"

namespace pipecoord::jobplan {

namespace sch = pipecoord::schedules;

namespace {

bool EqualStages(const v1::Plan& plan) {
  for (const v1::StageShard& s : plan.shards()) {
    if (s.num_layers() != plan.shards(0).num_layers()) return false;
  }
  return true;
}

// Where a probe for `window` goes in `jobs`: before the first compute action that starts at or
// after the window's end (stepping back over the receives posted for it), or before OPT.
int Position(const v1::RankJobs& jobs, const std::vector<ComputeSlot>& slots, const sch::Interval& window,
             double eps) {
  int at = -1;
  for (const ComputeSlot& s : slots) {
    if (s.start >= window.end - eps) {
      at = s.action_index;
      break;
    }
  }
  if (at < 0) {
    at = jobs.actions_size();
    if (at > 0 && jobs.actions(at - 1).op() == v1::OPT) --at;
    return at;
  }
  while (at > 0 && (jobs.actions(at - 1).op() == v1::RECV_F || jobs.actions(at - 1).op() == v1::RECV_B)) --at;
  return at;
}

}  // namespace

Result<std::vector<ProbeWindow>> ChooseProbeWindows(const v1::JobSpec& spec, const v1::Plan& plan) {
  auto expect = ExpectPlan(spec, plan);
  if (!expect.ok()) return expect.status();
  std::vector<std::vector<sch::Interval>> windows = expect->idle;
  bool closed = false;
  if (spec.costs().comm() == 0 && EqualStages(plan)) {
    auto pred = sch::PredictBubbles(spec.schedule(), spec.pp(), std::max(1, spec.vpp()), spec.microbatches(),
                                    spec.costs().f(), spec.costs().b(), spec.costs().w());
    if (pred.ok() && static_cast<int>(pred->windows.size()) == spec.pp()) {
      windows = pred->windows;
      closed = true;
    }
  }
  const double eps = 1e-9 * std::max(1.0, expect->makespan);
  std::vector<ProbeWindow> out;
  for (int r = 0; r < plan.ranks_size(); ++r) {
    ProbeWindow pw;
    pw.rank = r;
    pw.closed_form = closed;
    double best = 0;
    // A rank the closed form places no window for (interleaved rank 0: its idle time is in
    // the unplaced middle) takes the simulator's windows.
    bool placed = false;
    for (const sch::Interval& w : windows[r]) placed |= w.end - w.start > eps;
    if (closed && !placed) pw.closed_form = false;
    for (const sch::Interval& w : (placed ? windows[r] : expect->idle[r])) {
      if (w.end - w.start > best + eps) {
        best = w.end - w.start;
        pw.window = w;
      }
    }
    if (best > eps) pw.position = Position(plan.ranks(r), expect->ranks[r], pw.window, eps);
    out.push_back(pw);
  }
  return out;
}

Status PlaceProbes(const v1::JobSpec& spec, v1::Plan* plan) {
  if (!ResolveHealth(spec.health()).probes) return Status::Ok();
  auto windows = ChooseProbeWindows(spec, *plan);
  if (!windows.ok()) return windows.status();
  for (const ProbeWindow& pw : *windows) {
    if (pw.position < 0) continue;
    v1::RankJobs* jobs = plan->mutable_ranks(pw.rank);
    v1::Action probe;
    probe.set_op(v1::PROBE);
    // The stage of the action it precedes (or of the action before OPT): the rank holds it.
    const int near = std::min(pw.position, jobs->actions_size() - 1);
    probe.set_stage(jobs->actions(std::max(0, near)).stage());
    probe.set_microbatch(-1);
    probe.set_peer(-1);
    google::protobuf::RepeatedPtrField<v1::Action> rebuilt;
    for (int i = 0; i <= jobs->actions_size(); ++i) {
      if (i == pw.position) *rebuilt.Add() = probe;
      if (i < jobs->actions_size()) *rebuilt.Add() = jobs->actions(i);
    }
    jobs->mutable_actions()->Swap(&rebuilt);
  }
  return Status::Ok();
}

}  // namespace pipecoord::jobplan
