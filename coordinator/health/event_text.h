// How health events are written: one place for the rank names, units and the event itself, so
// every check's message reads the same way ("rank 1 (dp 0)", "0.081 s", "12.5 MiB").
#ifndef PIPECOORD_COORDINATOR_HEALTH_EVENT_TEXT_H_
#define PIPECOORD_COORDINATOR_HEALTH_EVENT_TEXT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/health.pb.h"
#include "proto/schedule.pb.h"

namespace pipecoord::coordinator::health {

// "rank 1 (dp 0)" for global rank g = dp * pp + rank.
std::string RankName(int global_rank, int pp);
// "1F3" (stage, op, micro-batch), "0PROBE".
std::string ActionName(const v1::Action& a);
// printf-style formatting into a std::string.
std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// "12.50 MiB"
std::string MiB(uint64_t bytes);
// The event for global rank g (rank and dp_rank split out; g < 0: the whole job).
v1::HealthEvent MakeEvent(v1::EventKind kind, int global_rank, int pp, int step, std::string message);

}  // namespace pipecoord::coordinator::health

#endif  // PIPECOORD_COORDINATOR_HEALTH_EVENT_TEXT_H_
