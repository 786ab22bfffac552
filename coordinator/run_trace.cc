#include "coordinator/run_trace.h"

#include <algorithm>
#include <map>

#include "common/perfetto_trace.h"
#include "common/rank_layout.h"
#include "jobplan/layout.h"

namespace pipecoord::coordinator {

std::string MeasuredRunTrace(const v1::Job& job, const std::vector<v1::ActionTiming>& actions,
                             const std::vector<int>& ranks) {
  PerfettoTrace trace;
  const RankLayout layout = jobplan::LayoutOf(job.spec());
  const int pp = layout.pp(), world = layout.world();
  std::vector<TraceArg> about = {TraceArg("job", job.id()), TraceArg("schedule", job.spec().schedule()),
                                 TraceArg("pp", int64_t{pp}), TraceArg("dp", int64_t{layout.dp()})};
  if (layout.tp() > 1) about.push_back(TraceArg("tp", int64_t{layout.tp()}));
  about.push_back(TraceArg("time_unit", "measured: us from the first action shown"));
  trace.SetOtherData(about);
  trace.ProcessName(0, job.id() + " measured");
  trace.ProcessName(1, job.id() + " predicted idle (scaled to each step)");
  for (int g = 0; g < world; ++g) {
    trace.ThreadName(0, g, layout.Name(g));
    trace.ThreadSortIndex(0, g, g);
  }
  for (int r = 0; r < pp; ++r) {
    trace.ThreadName(1, r, "rank " + std::to_string(r) + " predicted idle");
    trace.ThreadSortIndex(1, r, r);
  }
  // A REDUCE_GRAD runs in the background beside the rank's next actions: on a track of its own
  // (tid world + g) below the ranks, named only when the run has one.
  const bool reduces = std::any_of(actions.begin(), actions.end(),
                                   [](const v1::ActionTiming& a) { return a.action().op() == v1::REDUCE_GRAD; });
  if (reduces) {
    for (int g = 0; g < world; ++g) {
      trace.ThreadName(0, world + g, layout.Name(g) + " gradient all-reduce");
      trace.ThreadSortIndex(0, world + g, world + g);
    }
  }
  if (actions.empty()) return trace.Text();

  int64_t t0 = INT64_MAX;
  std::map<int, std::pair<int64_t, int64_t>> step_span;  // step -> [start, end]
  for (const auto& a : actions) {
    t0 = std::min(t0, a.start_ns());
    auto [it, fresh] = step_span.try_emplace(a.step(), a.start_ns(), a.end_ns());
    if (!fresh) {
      it->second.first = std::min(it->second.first, a.start_ns());
      it->second.second = std::max(it->second.second, a.end_ns());
    }
  }
  for (size_t i = 0; i < actions.size(); ++i) {
    const v1::ActionTiming& a = actions[i];
    const v1::Action& act = a.action();
    const std::string op = v1::Op_Name(act.op());
    TraceAction ev;
    ev.op = op;
    ev.stage = act.stage();
    ev.mb = act.microbatch();
    ev.peer = act.peer();
    ev.pid = 0;
    ev.tid = (i < ranks.size() ? ranks[i] : 0) + (act.op() == v1::REDUCE_GRAD ? world : 0);
    ev.ts_us = (a.start_ns() - t0) / 1e3;
    ev.dur_us = (a.end_ns() - a.start_ns()) / 1e3;
    ev.extra_args = {TraceArg("step", int64_t{a.step()})};
    if (a.tp_comm_bytes() > 0) {  // tensor-parallel collectives inside the action
      ev.extra_args.push_back(TraceArg::Number("tp_comm_us", a.tp_comm_ns() / 1e3));
      ev.extra_args.push_back(TraceArg("tp_comm_bytes", static_cast<int64_t>(a.tp_comm_bytes())));
    }
    if (a.recompute_ns() > 0) {  // rebuilding what activation recompute dropped, inside the action
      ev.extra_args.push_back(TraceArg::Number("recompute_us", a.recompute_ns() / 1e3));
    }
    if (a.dp_comm_bytes() > 0) {  // the data-parallel reduction (and ZeRO's gather) it ran
      ev.extra_args.push_back(TraceArg("dp_comm_bytes", static_cast<int64_t>(a.dp_comm_bytes())));
    }
    trace.Action(ev);
  }
  const double makespan = job.plan().predicted_makespan();
  if (makespan > 0) {
    for (const auto& [step, span] : step_span) {
      const double scale = (span.second - span.first) / makespan;  // ns per cost unit
      for (const v1::IdleWindow& w : job.plan().predicted_idle()) {
        trace.Idle("predicted idle", 1, w.rank(), (span.first - t0 + w.start() * scale) / 1e3,
                   (w.end() - w.start()) * scale / 1e3, {TraceArg("step", int64_t{step})});
      }
    }
  }
  return trace.Text();
}

}  // namespace pipecoord::coordinator
