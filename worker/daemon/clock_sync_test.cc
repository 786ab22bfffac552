#include "worker/daemon/clock_sync.h"

#include <gtest/gtest.h>

namespace pipecoord::worker {
namespace {

TEST(ClockSyncTest, OffsetFromTheShortestRoundTrip) {
  ClockSync c;
  EXPECT_EQ(c.round_trip_ns(), -1);
  // Coordinator clock = worker clock + 1000. Symmetric 10 ns legs, 5 ns inside the server.
  c.AddSample(100, 1110, 1115, 125);
  EXPECT_EQ(c.offset_ns(), 1000);
  EXPECT_EQ(c.round_trip_ns(), 20);
  // A slow, asymmetric sample (90 ns out, 10 back) would say 1040: ignored, its rtt is larger.
  c.AddSample(200, 1290, 1295, 305);
  EXPECT_EQ(c.offset_ns(), 1000);
  // A faster one wins.
  c.AddSample(300, 1302, 1302, 304);
  EXPECT_EQ(c.offset_ns(), 1000);
  EXPECT_EQ(c.round_trip_ns(), 4);
}

}  // namespace
}  // namespace pipecoord::worker
