// The one Chrome/Perfetto trace writer (JSON trace event format; load the text in
// ui.perfetto.dev or chrome://tracing). Used for a schedule's simulated timeline
// (schedules/trace_format.h) and for a job's measured run (coordinator/run_trace.h), so both
// look the same: same event names, categories, colours and layout.
//
// Ops are named as schedules::OpName and v1::Op_Name name them ("F", "B", "W", "BW", "SEND_F",
// "RECV_F", "SEND_B", "RECV_B", "PROBE", "OPT"; the two enums use the same names, which
// proto/op_kinds_test checks), plus "idle" for an idle window. The one table keyed by them:
//
//   op               category   cname (catapult's reserved colour names)
//   F                compute    thread_state_running
//   B                compute    rail_response
//   W                compute    rail_animation
//   BW               compute    rail_load
//   SEND_*, RECV_*   comm       generic_work
//   PROBE            probe      yellow
//   OPT              optimizer  olive
//   idle             idle       grey
//   anything else    other      black
//
// Layout: {"displayTimeUnit": "ms",\n "otherData": {...},\n "traceEvents": [\n  one event per
// line\n ]}\n (otherData only when set). Deterministic: same calls, same bytes.
#ifndef PIPECOORD_COMMON_PERFETTO_TRACE_H_
#define PIPECOORD_COMMON_PERFETTO_TRACE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pipecoord {

inline constexpr std::string_view kTraceIdle = "idle";

// The table above.
const char* TraceColour(std::string_view op);
const char* TraceCategory(std::string_view op);

// One member of an "args" or "otherData" object.
struct TraceArg {
  TraceArg(std::string_view key, std::string_view text);
  TraceArg(std::string_view key, const char* text) : TraceArg(key, std::string_view(text)) {}
  TraceArg(std::string_view key, int64_t value);
  static TraceArg Number(std::string_view key, double value);  // JsonNumber's rule

  std::string key;
  std::string json;  // the value, as JSON text
};

// One action of a rank's job list.
struct TraceAction {
  std::string_view op;  // "F", "SEND_F", ...
  int stage = 0;
  int mb = 0;
  int peer = -1;  // SEND/RECV: the other rank
  int pid = 0;
  int tid = 0;
  double ts_us = 0;
  double dur_us = 0;
  bool instant = false;  // an instant ("i") event at ts_us, e.g. communication that takes no time
  std::vector<TraceArg> extra_args;  // after {op, stage, mb[, peer]}
};

class PerfettoTrace {
 public:
  // Members of "otherData" (what the trace is of, units), written before the events.
  void SetOtherData(std::vector<TraceArg> members);

  // Metadata ("M") events: track names and order.
  void ProcessName(int pid, std::string_view name);
  void ThreadName(int pid, int tid, std::string_view name);
  void ThreadSortIndex(int pid, int tid, int index);

  // An action as a complete ("X") event, or an instant ("i", thread-scoped) one: named
  // "F mb3 s2", SEND/RECV "SEND_F mb3 s2 -> 1" / "RECV_F mb3 s3 <- 0"; category and colour from
  // the table; args {op, stage, mb[, peer for SEND/RECV]} then extra_args.
  void Action(const TraceAction& a);
  // An idle window as a complete event named `name` (category idle, colour grey).
  void Idle(std::string_view name, int pid, int tid, double ts_us, double dur_us, std::vector<TraceArg> args = {});

  // The whole trace, ending in a newline.
  std::string Text() const;

 private:
  void Meta(std::string_view what, int pid, int tid, const TraceArg& arg);

  std::vector<TraceArg> other_data_;
  std::vector<std::string> events_;  // each one JSON object
};

}  // namespace pipecoord

#endif  // PIPECOORD_COMMON_PERFETTO_TRACE_H_
