#include "schedules/trace_format.h"

#include "common/perfetto_trace.h"

namespace pipecoord::schedules {
namespace {

constexpr double kMicrosPerUnit = 1000.0;  // 1 cost unit = 1 ms

}  // namespace

std::string ScheduleToTrace(const Schedule& s, const Simulation& sim) {
  PerfettoTrace trace;
  trace.SetOtherData({TraceArg("schedule", s.name), TraceArg("pp", int64_t{s.pp}), TraceArg("vpp", int64_t{s.vpp}),
                      TraceArg("microbatches", int64_t{s.microbatches}), TraceArg("time_unit", "1 cost unit = 1 ms"),
                      TraceArg::Number("makespan_ms", sim.makespan), TraceArg::Number("bubble_rate", sim.bubble_rate)});
  trace.ProcessName(0, "pipecoord " + s.name);
  for (int r = 0; r < s.pp; ++r) {
    trace.ThreadName(0, r, "rank " + std::to_string(r));
    trace.ThreadSortIndex(0, r, r);
  }
  // REDUCE_GRAD runs in the background beside the rank's next actions (the simulator's lane): on
  // a track of its own per rank (tid pp + rank), named only when the schedule has one.
  bool reduces = false;
  for (const auto& list : s.ranks) {
    for (const Action& a : list) reduces = reduces || a.op == Op::kReduceGrad;
  }
  if (reduces) {
    for (int r = 0; r < s.pp; ++r) {
      trace.ThreadName(0, s.pp + r, "rank " + std::to_string(r) + " gradient all-reduce");
      trace.ThreadSortIndex(0, s.pp + r, s.pp + r);
    }
  }
  for (int r = 0; r < s.pp; ++r) {
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const Action& a = s.ranks[r][i];
      const bool timed = static_cast<size_t>(r) < sim.timing.size() && i < sim.timing[r].size();
      const Interval t = timed ? sim.timing[r][i] : Interval{};
      TraceAction ev;
      ev.op = OpName(a.op);
      ev.stage = a.stage;
      ev.mb = a.mb;
      ev.peer = a.peer;
      ev.tid = a.op == Op::kReduceGrad ? s.pp + r : r;
      ev.ts_us = t.start * kMicrosPerUnit;
      ev.dur_us = (t.end - t.start) * kMicrosPerUnit;
      // Communication takes no time in the simulation; an OVERLAP_F_B only marks its slot's start.
      ev.instant = IsComm(a.op) || a.op == Op::kOverlapFB;
      trace.Action(ev);
    }
    if (static_cast<size_t>(r) < sim.ranks.size()) {
      for (const Interval& idle : sim.ranks[r].idle) {
        trace.Idle("bubble", 0, r, idle.start * kMicrosPerUnit, (idle.end - idle.start) * kMicrosPerUnit);
      }
    }
  }
  return trace.Text();
}

}  // namespace pipecoord::schedules
