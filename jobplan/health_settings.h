// HealthSettings: a job's HealthConfig with every default filled in, and its validation.
#ifndef PIPECOORD_JOBPLAN_HEALTH_SETTINGS_H_
#define PIPECOORD_JOBPLAN_HEALTH_SETTINGS_H_

#include "common/status.h"
#include "proto/health.pb.h"

namespace pipecoord::jobplan {

struct HealthSettings {
  bool enabled = true;
  double bubble_slack = 0.5;          // of the predicted step time
  double bubble_min_s = 0.05;
  double straggler_threshold = 0.7;  // below nvidia-resiliency-ext's 0.75: a clean rank of a loaded 2-core machine scored 0.736 (docs/monitoring.md)
  int straggler_window = 3;           // steps a rank's current pace is taken over
  double straggler_min_delta_s = 0.0001;  // per action, below which a slowdown is not worth an alarm
  int warmup_steps = 1;
  double hang_step_factor = 5;
  double hang_floor_s = 10;
  double hang_startup_s = 60;
  double memory_device_fraction = 0.95;
  bool probes = true;
  bool replays = true;  // the probes replay an F where one fits (health.replayOff turns them off)
  // Steps measured (after the warm-up ones) before the predictions are calibrated on them.
  int calibration_steps = 3;
};

// Unset (0 / false) fields take the defaults above.
HealthSettings ResolveHealth(const v1::HealthConfig& config);

// INVALID_ARGUMENT naming the field and its rule, e.g.
// "spec.health.straggler_threshold: must be in [0, 1], got 1.5".
Status ValidateHealthConfig(const v1::HealthConfig& config);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_HEALTH_SETTINGS_H_
