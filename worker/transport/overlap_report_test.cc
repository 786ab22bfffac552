#include "worker/transport/overlap_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace pipecoord::worker {
namespace {

TEST(OverlapReportTest, SerialOverlapAndRatioFollowTheFormula) {
  auto f = ComputeOverlap({.compute_ms = 60, .transfer_ms = 40, .together_ms = 70});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_DOUBLE_EQ(f->serial_ms, 100);
  EXPECT_DOUBLE_EQ(f->overlap, 0.75);  // (60 + 40 - 70) / min(60, 40)
  EXPECT_DOUBLE_EQ(f->together_over_serial, 0.7);
  EXPECT_DOUBLE_EQ(f->times.compute_ms, 60);
  EXPECT_DOUBLE_EQ(f->times.transfer_ms, 40);
  EXPECT_DOUBLE_EQ(f->times.together_ms, 70);
}

TEST(OverlapReportTest, FullyHiddenIsOneSerialIsZeroInterferenceIsNegative) {
  auto hidden = ComputeOverlap({.compute_ms = 40, .transfer_ms = 60, .together_ms = 60});
  ASSERT_TRUE(hidden.ok());
  EXPECT_DOUBLE_EQ(hidden->overlap, 1.0);
  EXPECT_DOUBLE_EQ(hidden->together_over_serial, 0.6);  // max / serial: the floor
  auto serial = ComputeOverlap({.compute_ms = 40, .transfer_ms = 60, .together_ms = 100});
  ASSERT_TRUE(serial.ok());
  EXPECT_DOUBLE_EQ(serial->overlap, 0.0);
  EXPECT_DOUBLE_EQ(serial->together_over_serial, 1.0);
  auto worse = ComputeOverlap({.compute_ms = 40, .transfer_ms = 60, .together_ms = 110});
  ASSERT_TRUE(worse.ok());
  EXPECT_DOUBLE_EQ(worse->overlap, -0.25);
}

TEST(OverlapReportTest, RefusesTimesThatAreNotPositiveNamingTheField) {
  auto zero = ComputeOverlap({.compute_ms = 0, .transfer_ms = 1, .together_ms = 1});
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(zero.status().message(), "compute_ms: must be a positive finite number of milliseconds, got 0");
  auto nan = ComputeOverlap({.compute_ms = 1, .transfer_ms = std::nan(""), .together_ms = 1});
  ASSERT_FALSE(nan.ok());
  EXPECT_EQ(nan.status().message(), "transfer_ms: must be a positive finite number of milliseconds, got nan");
  auto negative = ComputeOverlap({.compute_ms = 1, .transfer_ms = 1, .together_ms = -2.5});
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().message(), "together_ms: must be a positive finite number of milliseconds, got -2.5");
}

TEST(OverlapReportTest, PrintsTheColumnsAndTheFiguresExactly) {
  auto f = ComputeOverlap({.compute_ms = 66.123, .transfer_ms = 67.031, .together_ms = 70.112});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(FormatOverlapTable(*f),
            "  compute_ms  transfer_ms  together_ms   serial_ms  overlap  together/serial\n"
            "      66.123       67.031       70.112     133.154    0.953           0.5265\n");
}

TEST(OverlapReportTest, CallsToMatchRoundsAndClamps) {
  EXPECT_EQ(*CallsToMatch(66.0, 0.2, 1000), 330);
  EXPECT_EQ(*CallsToMatch(66.0, 0.3, 1000), 220);
  EXPECT_EQ(*CallsToMatch(1.25, 0.5, 1000), 3);  // 2.5 rounds away from zero
  EXPECT_EQ(*CallsToMatch(0.05, 0.2, 1000), 1);  // at least one call
  EXPECT_EQ(*CallsToMatch(1e9, 0.2, 500), 500);  // at most max_calls
  EXPECT_EQ(*CallsToMatch(std::numeric_limits<double>::max(), 1e-300, 7), 7);
}

TEST(OverlapReportTest, CallsToMatchRefusesBadArgumentsNamingThem) {
  auto a = CallsToMatch(0, 0.2, 10);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(a.status().message(), "target_ms: must be a positive finite number of milliseconds, got 0");
  auto b = CallsToMatch(1, std::numeric_limits<double>::infinity(), 10);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "per_call_ms: must be a positive finite number of milliseconds, got inf");
  auto c = CallsToMatch(1, 0.2, 0);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "max_calls: must be >= 1, got 0");
}

}  // namespace
}  // namespace pipecoord::worker
