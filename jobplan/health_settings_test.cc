#include "jobplan/health_settings.h"

#include <gtest/gtest.h>

namespace pipecoord::jobplan {
namespace {

TEST(HealthSettings, UnsetFieldsTakeTheDefaults) {
  const HealthSettings s = ResolveHealth(v1::HealthConfig());
  EXPECT_TRUE(s.enabled);
  EXPECT_TRUE(s.probes);
  EXPECT_EQ(s.straggler_threshold, 0.7);
  EXPECT_EQ(s.straggler_window, 3);
  EXPECT_EQ(s.hang_floor_s, 10);
  EXPECT_EQ(s.calibration_steps, 3);
  v1::HealthConfig c;
  c.set_straggler_threshold(0.5);
  c.set_probes_off(true);
  EXPECT_EQ(ResolveHealth(c).straggler_threshold, 0.5);
  EXPECT_FALSE(ResolveHealth(c).probes);
  c.set_disabled(true);
  EXPECT_FALSE(ResolveHealth(c).enabled);
}

TEST(HealthSettings, ErrorsNameTheFieldAndTheRule) {
  v1::HealthConfig c;
  c.set_straggler_threshold(1.5);
  EXPECT_EQ(ValidateHealthConfig(c).message(), "spec.health.stragglerThreshold: must be in [0, 1], got 1.5");
  c = {};
  c.set_hang_floor_s(-1);
  EXPECT_EQ(ValidateHealthConfig(c).message(), "spec.health.hangFloorS: must be in [0, 86400], got -1");
  c = {};
  c.set_probe_size(4096);
  EXPECT_EQ(ValidateHealthConfig(c).message(), "spec.health.probeSize: must be in [0, 1024], got 4096");
  c = {};
  c.set_calibration_steps(-2);
  EXPECT_EQ(ValidateHealthConfig(c).message(), "spec.health.calibrationSteps: must be in [0, 10000], got -2");
  c.set_calibration_steps(5);
  EXPECT_EQ(ResolveHealth(c).calibration_steps, 5);
  EXPECT_TRUE(ValidateHealthConfig(v1::HealthConfig()).ok());
}

}  // namespace
}  // namespace pipecoord::jobplan
