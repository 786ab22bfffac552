// How health events are written: one place for the rank names, units and the event itself, so
// every check's message reads the same way ("rank 1 (dp 0)", "0.081 s", "12.5 MiB").
#ifndef PIPECOORD_COORDINATOR_HEALTH_EVENT_TEXT_H_
#define PIPECOORD_COORDINATOR_HEALTH_EVENT_TEXT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/rank_layout.h"
#include "proto/health.pb.h"
#include "proto/schedule.pb.h"

namespace pipecoord::coordinator::health {

// Rank names are RankLayout::Name's: "rank 1 (dp 0)" (and ", tp 1" with tensor parallelism).
// "1F3" (stage, op, micro-batch), "0PROBE".
std::string ActionName(const v1::Action& a);
// printf-style formatting into a std::string.
std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// "12.50 MiB"
std::string MiB(uint64_t bytes);
// The event for global rank g (rank, dp_rank and tp_rank split out; g < 0: the whole job).
v1::HealthEvent MakeEvent(v1::EventKind kind, int global_rank, const RankLayout& layout, int step, std::string message);

}  // namespace pipecoord::coordinator::health

#endif  // PIPECOORD_COORDINATOR_HEALTH_EVENT_TEXT_H_
