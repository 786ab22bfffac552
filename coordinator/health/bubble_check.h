// Bubble check: for each rank and step, the measured idle window before each compute action
// against the plan's predicted one at the same position. The idle before compute action k is
// start(k) - end(k-1) (the first one: from the rank's step start, predicted as the rank's
// leading idle plus the trailing idle of the step before). With scale the fastest rank's
// seconds per cost unit and T the predicted step time (makespan x scale), a window is flagged
// when
//   measured - predicted x scale > max(bubble_min_s, bubble_slack x T).
// A rank is flagged when its step has such a window kBubblePersistence steps in a row: one late
// input (a peer descheduled for a moment) is noise, a peer that keeps its neighbours waiting is
// not. The event names the rank, the step, the window (which action it ends at, where in the
// step, how long, the prediction) and the peer the action waited on; one event per episode.
// (JobMonitor runs it once every rank has reported the step and adds the root of the wait chain
// from the step's idle split.)
// Only calibrated timelines are checked (JobMonitor): the plan's cost model scaled by one number
// does not predict a CPU's idle windows well enough to call 50 ms of idle a fault.
#ifndef PIPECOORD_COORDINATOR_HEALTH_BUBBLE_CHECK_H_
#define PIPECOORD_COORDINATOR_HEALTH_BUBBLE_CHECK_H_

#include <optional>
#include <vector>

#include "common/rank_layout.h"
#include "jobplan/plan_expectations.h"
#include "jobplan/health_settings.h"
#include "proto/health.pb.h"
#include "proto/telemetry.pb.h"

namespace pipecoord::coordinator::health {

struct MeasuredWindow {
  int slot = -1;             // compute slot the window ends at
  double start_s = 0;        // from the rank's step start
  double measured_s = 0;
  double predicted_s = 0;
  double excess_s = 0;
  int64_t wait_ns = 0;
  int wait_peer = -1;        // pipeline rank
};

// Consecutive steps of a rank over the limit before it is flagged: 3, since under `stress --cpu
// 2` a clean rank went over the limit 2 steps in a row (1 run of 5 of the fault matrix).
inline constexpr int kBubblePersistence = 3;

class BubbleCheck {
 public:
  BubbleCheck(const jobplan::HealthSettings& settings, const jobplan::PlanExpectations& plan, const RankLayout& layout);

  // The measured windows of one rank's step (actions in list order), largest excess first.
  // Empty when the actions do not match the plan's compute order.
  std::vector<MeasuredWindow> Windows(int rank, const std::vector<v1::ActionTiming>& actions,
                                      double scale) const;
  // Checks one rank's step; scale <= 0 (not calibrated yet) or a warm-up step checks nothing.
  std::optional<v1::HealthEvent> OnRankStep(int global_rank, int step,
                                            const std::vector<v1::ActionTiming>& actions, double scale);
  double Limit(double scale) const;  // seconds of excess allowed

 private:
  jobplan::HealthSettings settings_;
  const jobplan::PlanExpectations& plan_;
  RankLayout layout_;
  std::vector<bool> flagged_;
  std::vector<int> over_;  // consecutive steps over the limit
};

}  // namespace pipecoord::coordinator::health

#endif  // PIPECOORD_COORDINATOR_HEALTH_BUBBLE_CHECK_H_
