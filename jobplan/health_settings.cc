#include "jobplan/health_settings.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace pipecoord::jobplan {
namespace {

Status InRange(const char* field, double v, double lo, double hi) {
  if (!std::isfinite(v) || v < lo || v > hi) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "spec.health.%s: must be in [%g, %g], got %g", field, lo, hi, v);
    return InvalidArgument(buf);
  }
  return Status::Ok();
}

}  // namespace

HealthSettings ResolveHealth(const v1::HealthConfig& c) {
  HealthSettings s;
  s.enabled = !c.disabled();
  if (c.bubble_slack() > 0) s.bubble_slack = c.bubble_slack();
  if (c.bubble_min_s() > 0) s.bubble_min_s = c.bubble_min_s();
  if (c.straggler_threshold() > 0) s.straggler_threshold = c.straggler_threshold();
  if (c.straggler_window() > 0) s.straggler_window = c.straggler_window();
  if (c.straggler_min_delta_s() > 0) s.straggler_min_delta_s = c.straggler_min_delta_s();
  if (c.warmup_steps() > 0) s.warmup_steps = c.warmup_steps();
  if (c.hang_step_factor() > 0) s.hang_step_factor = c.hang_step_factor();
  if (c.hang_floor_s() > 0) s.hang_floor_s = c.hang_floor_s();
  if (c.hang_startup_s() > 0) s.hang_startup_s = c.hang_startup_s();
  if (c.memory_device_fraction() > 0) s.memory_device_fraction = c.memory_device_fraction();
  s.probes = s.enabled && !c.probes_off();
  s.replays = s.probes && !c.replay_off();
  if (c.calibration_steps() > 0) s.calibration_steps = c.calibration_steps();
  return s;
}

Status ValidateHealthConfig(const v1::HealthConfig& c) {
  PIPECOORD_RETURN_IF_ERROR(InRange("bubbleSlack", c.bubble_slack(), 0, 100));
  PIPECOORD_RETURN_IF_ERROR(InRange("bubbleMinS", c.bubble_min_s(), 0, 3600));
  PIPECOORD_RETURN_IF_ERROR(InRange("stragglerThreshold", c.straggler_threshold(), 0, 1));
  PIPECOORD_RETURN_IF_ERROR(InRange("stragglerWindow", c.straggler_window(), 0, 10000));
  PIPECOORD_RETURN_IF_ERROR(InRange("stragglerMinDeltaS", c.straggler_min_delta_s(), 0, 3600));
  PIPECOORD_RETURN_IF_ERROR(InRange("warmupSteps", c.warmup_steps(), 0, 10000));
  PIPECOORD_RETURN_IF_ERROR(InRange("hangStepFactor", c.hang_step_factor(), 0, 10000));
  PIPECOORD_RETURN_IF_ERROR(InRange("hangFloorS", c.hang_floor_s(), 0, 86400));
  PIPECOORD_RETURN_IF_ERROR(InRange("hangStartupS", c.hang_startup_s(), 0, 86400));
  PIPECOORD_RETURN_IF_ERROR(InRange("memoryDeviceFraction", c.memory_device_fraction(), 0, 1));
  PIPECOORD_RETURN_IF_ERROR(InRange("probeSize", c.probe_size(), 0, 1024));
  PIPECOORD_RETURN_IF_ERROR(InRange("calibrationSteps", c.calibration_steps(), 0, 10000));
  PIPECOORD_RETURN_IF_ERROR(InRange("detailEvery", c.detail_every(), 0, 1000000));
  PIPECOORD_RETURN_IF_ERROR(InRange("detailFrom", c.detail_from(), 0, 1e9));
  PIPECOORD_RETURN_IF_ERROR(InRange("detailSteps", c.detail_steps(), 0, 1e9));
  if (!c.detail_replicas().empty() && c.detail_replicas() != "all" && c.detail_replicas() != "first") {
    return InvalidArgument("spec.health.detailReplicas: must be \"all\", \"first\" or unset, got \"" + c.detail_replicas() +
                           "\"");
  }
  if (!c.tp_speaker().empty() && c.tp_speaker() != "on" && c.tp_speaker() != "off") {
    return InvalidArgument("spec.health.tpSpeaker: must be \"on\", \"off\" or unset, got \"" + c.tp_speaker() + "\"");
  }
  return Status::Ok();
}

}  // namespace pipecoord::jobplan
