// Hang check: every rank reports where it is (heartbeat-carried Progress between steps, the
// step's telemetry at its end). A rank whose position has not advanced within
//   deadline = max(hang_floor_s, hang_step_factor x predicted step time)
// (before the step time is known: max(hang_floor_s, hang_startup_s)) raises one HANG event per
// episode. The event lists each rank's last reported action and names as stuck the rank at the
// end of the wait chain (rank 0 waits for rank 1, rank 1 runs 1F0 and reports nothing more:
// rank 1 is stuck).
#ifndef PIPECOORD_COORDINATOR_HEALTH_HANG_CHECK_H_
#define PIPECOORD_COORDINATOR_HEALTH_HANG_CHECK_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "common/rank_layout.h"
#include "jobplan/health_settings.h"
#include "proto/health.pb.h"
#include "proto/telemetry.pb.h"

namespace pipecoord::coordinator::health {

class HangCheck {
 public:
  // `steps`: the job's step count (a rank past its last step is done, never hung).
  HangCheck(const jobplan::HealthSettings& settings, const RankLayout& layout, int steps, int64_t start_ns);

  // A heartbeat's Progress, arrived at `now_ns`. The rank's last progress is dated
  // now_ns - progress.progress_age_ns() (the worker measures that age when it sends: no clock
  // sync, at most one network hop late), so detection does not wait for the next heartbeat:
  // with OnTick called every period P, a rank is flagged within deadline + P of its last
  // progress at any heartbeat period shorter than the deadline.
  void OnProgress(int global_rank, const v1::Progress& progress, int64_t now_ns);
  // The rank finished `step` (its telemetry arrived).
  void OnStepReported(int global_rank, int step, int64_t now_ns);
  // predicted_step_s <= 0: not calibrated yet (the startup deadline applies).
  std::optional<v1::HealthEvent> OnTick(int64_t now_ns, double predicted_step_s);
  double Deadline(double predicted_step_s) const;

 private:
  struct RankState {
    int64_t position = -1;        // step * 1'000'000 + action index (+ 999'999 once the step is done)
    int64_t changed_ns = 0;
    v1::Progress last;
    bool has_progress = false;
    bool done = false;
  };
  // `at_ns`: when the rank reached `position`; never dated before the rank's previous change.
  void Advance(int g, int64_t position, int64_t at_ns);

  jobplan::HealthSettings settings_;
  RankLayout layout_;
  int steps_;
  std::vector<RankState> ranks_;
  bool flagged_ = false;
};

}  // namespace pipecoord::coordinator::health

#endif  // PIPECOORD_COORDINATOR_HEALTH_HANG_CHECK_H_
