#include "cli/best_text.h"

#include <gtest/gtest.h>

namespace pipecoord::cli {
namespace {

v1::BestScheduleChoice Choice(const char* name, int vpp, double makespan, double bubble, double peak) {
  v1::BestScheduleChoice c;
  c.set_schedule(name);
  c.set_vpp(vpp);
  c.set_predicted_makespan(makespan);
  c.set_predicted_bubble_rate(bubble);
  c.set_peak_activations(peak);
  return c;
}

TEST(BestScheduleTextTest, WinnerRunnersUpAndRefusals) {
  v1::BestScheduleReport r;
  *r.add_ranked() = Choice("v-half", 2, 26.5, 0.125, 3);
  *r.add_ranked() = Choice("v-min", 2, 29.5, 0.2, 2);
  *r.add_ranked() = Choice("zb-auto", 1, 31, 0.25, 3);
  r.add_refused("fthenb: peak activations 8 on rank 0, above the memory limit 3");
  r.add_refused("1f1b: peak activations 4 on rank 0, above the memory limit 3");
  r.set_mem_limit(3);
  EXPECT_EQ(BestScheduleText(r),
            "best      chose v-half (vpp 2): makespan 26.5 cost units, bubble 0.1250, peak 3 micro-batches\n"
            "runner-up v-min (vpp 2): makespan 29.5, bubble 0.2000, peak 2\n"
            "runner-up zb-auto (vpp 1): makespan 31, bubble 0.2500, peak 3\n"
            "refused   2 within memLimit 3: fthenb: peak activations 8 on rank 0, above the memory limit 3; 1f1b: "
            "peak activations 4 on rank 0, above the memory limit 3\n");
  EXPECT_EQ(BestScheduleText(r, 1),
            "best      chose v-half (vpp 2): makespan 26.5 cost units, bubble 0.1250, peak 3 micro-batches\n"
            "runner-up v-min (vpp 2): makespan 29.5, bubble 0.2000, peak 2\n"
            "          ... and 1 more (--format json lists them)\n"
            "refused   2 within memLimit 3: fthenb: peak activations 8 on rank 0, above the memory limit 3; 1f1b: "
            "peak activations 4 on rank 0, above the memory limit 3\n");
  EXPECT_EQ(BestScheduleText(v1::BestScheduleReport{}), "");
}

}  // namespace
}  // namespace pipecoord::cli
