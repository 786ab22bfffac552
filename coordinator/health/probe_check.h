// Probe check (numerical "aadiff" probes): each PROBE action runs a known-answer GEMM
// (kernels/cpu/known_answer_gemm.h) seeded by the job and the step, and reports HashFloats of
// its output. The coordinator computes the same product and compares bit for bit; every
// data-parallel replica of every rank runs the same probe, so replicas must agree with each
// other too. A mismatch is an SDC (silent data corruption) event naming the rank, the step,
// both checksums and what the rank's replicas reported (with dp 1, that the known answer was
// the only comparison); one event per rank and episode.
#ifndef PIPECOORD_COORDINATOR_HEALTH_PROBE_CHECK_H_
#define PIPECOORD_COORDINATOR_HEALTH_PROBE_CHECK_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "common/rank_layout.h"
#include "proto/health.pb.h"

namespace pipecoord::coordinator::health {

class ProbeCheck {
 public:
  ProbeCheck(uint64_t job_seed, int probe_size, const RankLayout& layout);

  std::optional<v1::HealthEvent> OnProbe(int global_rank, int step, uint64_t checksum);
  uint64_t Expected(int step);  // cached for the last few steps
  int64_t probes_checked() const { return checked_; }

 private:
  uint64_t seed_;
  int n_;
  RankLayout layout_;
  std::map<int, uint64_t> expected_;                 // step -> known answer
  std::map<int, std::map<int, uint64_t>> reported_;  // step -> global rank -> checksum
  std::vector<bool> flagged_;
  int64_t checked_ = 0;
};

}  // namespace pipecoord::coordinator::health

#endif  // PIPECOORD_COORDINATOR_HEALTH_PROBE_CHECK_H_
