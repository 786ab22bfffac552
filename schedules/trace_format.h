// Chrome/Perfetto trace export: load the text in ui.perfetto.dev or chrome://tracing.
//
// Time unit: 1 cost unit = 1 ms (trace timestamps are microseconds, so ts = 1000 x time).
// One process (pid 0, named after the schedule) with one track per rank (tid = rank, thread
// name "rank N"). Each compute action is a complete ("X") event named "<op> mb<m> s<stage>"
// (e.g. "F mb3 s2") with args {op, stage, mb} and a catapult reserved colour ("cname"):
// F thread_state_running, B rail_response, W rail_animation, BW rail_load, PROBE yellow,
// OPT olive. Communication takes no time and appears as instant ("i") events named
// "SEND_F mb3 s2 -> 1" / "RECV_F mb3 s3 <- 0" (cname generic_work). Idle windows are "X"
// events named "bubble" (cat "idle", cname grey).
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
