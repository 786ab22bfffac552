// The Chrome/Perfetto trace of a measured run: one track per rank with the actions as the
// workers timed them, and beside each a track of the plan's predicted idle windows, scaled to
// each measured step, so unexpected bubbles stand out. Written with the one trace writer
// (common/perfetto_trace.h): the same event names, categories and colours as a schedule's
// simulated trace (`pipectl schedule --format perfetto`); measured SEND/RECV take time here, so
// they are complete events, not instants. A REDUCE_GRAD (a stage's gradient all-reduce, running in
// the background beside the rank's next actions) goes on a track of its own per rank.
#ifndef PIPECOORD_COORDINATOR_RUN_TRACE_H_
#define PIPECOORD_COORDINATOR_RUN_TRACE_H_

#include <string>
#include <vector>

#include "proto/job.pb.h"
#include "proto/telemetry.pb.h"

namespace pipecoord::coordinator {

// `actions[i]` was reported by global rank `ranks[i]`; times are ns on the coordinator's clock.
// Trace time is in microseconds from the first action. Valid JSON even with no actions.
std::string MeasuredRunTrace(const v1::Job& job, const std::vector<v1::ActionTiming>& actions,
                             const std::vector<int>& ranks);

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_RUN_TRACE_H_
