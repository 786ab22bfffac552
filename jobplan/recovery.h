// In-place recovery of a lost rank (docs/operations.md, "a lost rank"): whether a job can take
// one over on a spare worker, and the session of each rebuilt data plane. Pure.
#ifndef PIPECOORD_JOBPLAN_RECOVERY_H_
#define PIPECOORD_JOBPLAN_RECOVERY_H_

#include <cstdint>
#include <string>

#include "proto/job.pb.h"

namespace pipecoord::jobplan {

// Empty when a lost rank of `spec` (validated) can be taken over in place: a data-parallel
// replica holds its stage's whole state (dp >= 2, no ZeRO shard that only it held, no tensor-
// parallel group to rebuild) and the workers run the commit before each optimizer step (the
// built-in CPU worker). Otherwise why not, for the event that says the restart policy applies.
inline std::string InPlaceRecoveryRefusal(const v1::JobSpec& spec) {
  if (spec.recovery() == "restart") return "spec.recovery is \"restart\"";
  if (spec.dp() < 2) return "dp 1: no data-parallel replica holds the lost rank's state";
  if (spec.zero() >= 1) return "ZeRO: the lost rank's optimizer shard is held by no other rank";
  if (spec.device() == "cuda") return "cuda workers (in-place recovery runs on the CPU backend only)";
  if (!spec.worker().kind().empty() && spec.worker().kind() != "builtin") {
    return "workers of kind \"" + spec.worker().kind() + "\" (in-place recovery runs on the built-in worker only)";
  }
  return "";
}

// Whether the ranks of `spec` run the commit (executor.h) before each optimizer step.
inline bool RunsStepCommit(const v1::JobSpec& spec) { return InPlaceRecoveryRefusal(spec).empty(); }

// The session a data plane of recovery `generation` (0: the attempt's first, < kMaxGenerations)
// connects with: a link of an older generation is never taken for one of the new, and, as the
// transport's handshake wants (tcp_transport.h), they only grow, across attempts too.
inline constexpr int kMaxGenerations = 1 << 16;
inline uint64_t DataPlaneSession(uint64_t session, int generation) {
  return (session << 16) + static_cast<uint64_t>(generation);
}

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_RECOVERY_H_
