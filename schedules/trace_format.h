// Chrome/Perfetto trace export: load the text in ui.perfetto.dev or chrome://tracing.
//
// Time unit: 1 cost unit = 1 ms (trace timestamps are microseconds, so ts = 1000 x time).
// Written with the one trace writer (common/perfetto_trace.h, which holds the colour table):
// one process (pid 0, named after the schedule) with one track per rank (tid = rank, thread
// name "rank N"). Each compute action is a complete ("X") event named "<op> mb<m> s<stage>"
// (e.g. "F mb3 s2") with args {op, stage, mb} and the op's colour ("cname"). Communication
// takes no time and appears as instant ("i") events named "SEND_F mb3 s2 -> 1" /
// "RECV_F mb3 s3 <- 0" (category comm). Idle windows are "X" events named "bubble" (category
// idle, cname grey).
#ifndef PIPECOORD_SCHEDULES_TRACE_FORMAT_H_
#define PIPECOORD_SCHEDULES_TRACE_FORMAT_H_

#include <string>

#include "schedules/schedule.h"
#include "schedules/simulator.h"

namespace pipecoord::schedules {

// {"displayTimeUnit": "ms", "otherData": {...}, "traceEvents": [...]}, one event per line,
// ending in a newline. `sim` must come from Simulate(schedule, ...). Deterministic.
std::string ScheduleToTrace(const Schedule& schedule, const Simulation& sim);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_TRACE_FORMAT_H_
