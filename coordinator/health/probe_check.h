// Probe check (numerical "aadiff" probes): each PROBE action runs a known-answer GEMM
// (kernels/cpu/known_answer_gemm.h) seeded by the job and the step, at its stage's largest GEMM
// (jobplan::ProbeGemmFor), and reports the sketch checksum of its output. The coordinator
// computes the sketch from the seeded inputs (O((m + n) k), cached per step and shape) and
// compares bit for bit; every
// data-parallel replica of every rank runs the same probe, so replicas must agree with each
// other too. A mismatch is an SDC (silent data corruption) event naming the rank, the step,
// both checksums and what the rank's replicas reported (with dp 1, that the known answer was
// the only comparison); one event per rank and episode.
#ifndef PIPECOORD_COORDINATOR_HEALTH_PROBE_CHECK_H_
#define PIPECOORD_COORDINATOR_HEALTH_PROBE_CHECK_H_

#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "common/rank_layout.h"
#include "kernels/cpu/known_answer_gemm.h"
#include "proto/health.pb.h"
#include "proto/telemetry.pb.h"

namespace pipecoord::coordinator::health {

class ProbeCheck {
 public:
  // shapes[r]: what pipeline rank r's probe computes; a single shape stands for every rank's.
  ProbeCheck(uint64_t job_seed, std::vector<kernels::cpu::ProbeShape> shapes, const RankLayout& layout);

  std::optional<v1::HealthEvent> OnProbe(int global_rank, int step, uint64_t checksum);
  // The replay probe (proto/telemetry.proto ProbeReplay): an F run twice on the same input and
  // weights must give the same bits; a mismatch is an SDC event naming the F (one per episode).
  // A seeded replay (replay.seeded()) is compared across the rank's data-parallel replicas instead,
  // once all have reported the step: a replica that differs from the majority is an SDC event
  // (with two that differ, both are named: either may be wrong).
  std::vector<v1::HealthEvent> OnReplay(int global_rank, int step, const v1::ProbeReplay& replay);
  int64_t replays_checked() const { return replays_checked_; }
  // The known answer of pipeline rank `rank`'s probe at `step` (cached for the last few steps).
  uint64_t Expected(int step, int rank);
  const kernels::cpu::ProbeShape& ShapeOf(int rank) const;
  int64_t probes_checked() const { return checked_; }

 private:
  uint64_t seed_;
  std::vector<kernels::cpu::ProbeShape> shapes_;
  RankLayout layout_;
  std::map<int, std::map<std::tuple<int64_t, int64_t, int64_t>, uint64_t>> expected_;  // step -> shape -> answer
  std::map<int, std::map<int, uint64_t>> reported_;  // step -> global rank -> checksum
  std::vector<bool> flagged_, replay_flagged_, seeded_flagged_;
  std::map<int, std::map<int, uint64_t>> seeded_;  // step -> global rank -> seeded forward's checksum
  // The seeded replay: once every replica of g's position reported `step`, the ones that differ
  // from the others (all of them when no checksum has a majority).
  std::vector<v1::HealthEvent> OnSeeded(int g, int step, const v1::ProbeReplay& replay);
  int64_t checked_ = 0, replays_checked_ = 0;
};

}  // namespace pipecoord::coordinator::health

#endif  // PIPECOORD_COORDINATOR_HEALTH_PROBE_CHECK_H_
