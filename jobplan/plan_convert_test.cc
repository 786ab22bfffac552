#include "jobplan/plan_convert.h"

#include <gtest/gtest.h>

#include "jobplan/plan_job.h"
#include "jobplan/test_spec.h"

namespace pipecoord::jobplan {
namespace {

namespace sch = pipecoord::schedules;

// Every op, both ways, field for field.
TEST(PlanConvertTest, EveryOpRoundTrips) {
  for (int k = 0; k < sch::kNumOps; ++k) {
    const sch::Action a{static_cast<sch::Op>(k), 3, 5, k % 2 ? 1 : -1};
    const v1::Action p = ToProto(a);
    EXPECT_EQ(v1::Op_Name(p.op()), sch::OpName(a.op));
    EXPECT_EQ(p.stage(), 3);
    EXPECT_EQ(p.microbatch(), 5);
    EXPECT_EQ(p.peer(), a.peer);
    const sch::Action back = FromProto(p);
    EXPECT_EQ(back.op, a.op);
    EXPECT_EQ(back.stage, a.stage);
    EXPECT_EQ(back.mb, a.mb);
    EXPECT_EQ(back.peer, a.peer);
  }
}

// A planned job's lists (communication, PROBE and OPT included) survive the trip unchanged.
TEST(PlanConvertTest, APlanRoundTripsThroughASchedule) {
  const v1::JobSpec spec = TestSpec("zbv");
  const v1::Plan plan = PlanJob(spec).value();
  const sch::Schedule s = PlanToSchedule(spec, plan);
  EXPECT_EQ(s.name, "zbv");
  EXPECT_EQ(s.vpp, 2);
  v1::Plan again = plan;
  ScheduleToPlan(s, &again);
  EXPECT_EQ(again.SerializeAsString(), plan.SerializeAsString());
}

}  // namespace
}  // namespace pipecoord::jobplan
