#include "coordinator/http/dashboard_json.h"

#include <gtest/gtest.h>

#include <limits>

namespace pipecoord::coordinator::http {
namespace {

v1::Job SmallJob() {
  v1::Job j;
  j.set_id("job-1");
  j.mutable_spec()->set_name("a<b>&\"c\"");
  j.mutable_spec()->set_schedule("1f1b");
  j.mutable_spec()->set_pp(2);
  j.mutable_spec()->set_dp(1);
  j.mutable_spec()->set_steps(4);
  j.set_state(v1::RUNNING);
  j.set_steps_done(1);
  j.mutable_plan()->set_predicted_bubble_rate(0.25);
  v1::IdleWindow* w = j.mutable_plan()->add_predicted_idle();
  w->set_rank(1);
  w->set_start(0);
  w->set_end(2);
  v1::StepRecord* s = j.add_steps();
  s->set_step(0);
  s->set_loss(2.5);
  s->set_step_time_s(0.125);
  s->set_measured_bubble_rate(0.3);
  v1::HealthEvent* e = j.add_events();
  e->set_kind(v1::BUBBLE);
  e->set_rank(1);
  e->set_unix_ms(5);
  e->set_message("rank 1 idle\n</script>");
  return j;
}

TEST(DashboardJsonTest, JobsListingExact) {
  v1::Job fresh;
  fresh.set_id("job-2");
  fresh.set_state(v1::PENDING);
  EXPECT_EQ(JobsJson({SmallJob(), fresh}),
            "{\"jobs\":[{\"id\":\"job-1\",\"name\":\"a\\u003cb\\u003e\\u0026\\\"c\\\"\",\"state\":\"RUNNING\","
            "\"schedule\":\"1f1b\",\"pp\":2,\"dp\":1,\"steps_done\":1,\"steps\":4,\"loss\":2.5,\"health_events\":1},"
            "{\"id\":\"job-2\",\"name\":\"\",\"state\":\"PENDING\",\"schedule\":\"\",\"pp\":0,\"dp\":0,"
            "\"steps_done\":0,\"steps\":0,\"loss\":null,\"health_events\":0}]}");
  EXPECT_EQ(JobsJson({}), "{\"jobs\":[]}");
}

TEST(DashboardJsonTest, WorkersListingExact) {
  v1::WorkerInfo w;
  w.set_worker_id("w-1");
  w.set_host("host\x01");
  w.set_device_kind("cpu");
  w.set_data_endpoint("127.0.0.1:5000");
  w.set_job_id("job-1");
  w.set_rank(3);
  w.set_lease_expires_in_ms(1500);
  EXPECT_EQ(WorkersJson({w}),
            "{\"workers\":[{\"id\":\"w-1\",\"host\":\"host\\u0001\",\"device\":\"cpu\",\"endpoint\":"
            "\"127.0.0.1:5000\",\"job\":\"job-1\",\"rank\":3,\"lease_ms\":1500}]}");
}

TEST(DashboardJsonTest, ErrorExact) {
  EXPECT_EQ(ErrorJson("job \"x<y\" not found"), "{\"error\":\"job \\\"x\\u003cy\\\" not found\"}");
}

TEST(DashboardJsonTest, JobDetailExact) {
  health::HealthSnapshot h;
  h.enabled = true;
  h.seconds_per_cost = 0.25;
  h.predicted_step_s = 1.5;
  h.hang_deadline_s = std::numeric_limits<double>::infinity();
  h.probes_checked = 2;
  v1::ActionTiming t;
  t.mutable_action()->set_op(v1::BW);
  t.mutable_action()->set_stage(1);
  t.mutable_action()->set_microbatch(3);
  t.set_step(7);
  t.set_start_ns(2'000'000'000);
  t.set_end_ns(2'500'000'000);
  t.set_wait_ns(250'000'000);
  h.recent = {t};
  h.recent_rank = {1};
  health::StragglerScore sc;
  sc.global_rank = 1;
  sc.op = v1::B;
  sc.relative = 0.5;
  sc.individual = 0.75;
  h.scores = {sc};
  h.peak_bytes = {100, 18446744073709551615u};
  h.budget_bytes = {1000};
  EXPECT_EQ(JobDetailJson(SmallJob(), h),
            "{\"id\":\"job-1\",\"name\":\"a\\u003cb\\u003e\\u0026\\\"c\\\"\",\"state\":\"RUNNING\","
            "\"schedule\":\"1f1b\",\"pp\":2,\"dp\":1,\"steps_done\":1,\"steps\":4,\"failure_cause\":\"\","
            "\"predicted_bubble_rate\":0.25,"
            "\"health\":{\"enabled\":true,\"seconds_per_cost\":0.25,\"predicted_step_s\":1.5,"
            "\"hang_deadline_s\":null,\"probes_checked\":2},"
            "\"timeline\":{\"actions\":[{\"rank\":1,\"dp\":0,\"row\":1,\"step\":7,\"op\":\"BW\",\"stage\":1,"
            "\"mb\":3,\"start_s\":0,\"end_s\":0.5,\"wait_s\":0.25}],"
            "\"predicted_idle\":[{\"row\":1,\"step\":7,\"start_s\":0,\"end_s\":0.5}]},"
            "\"events\":[{\"kind\":\"BUBBLE\",\"rank\":1,\"dp\":0,\"step\":0,\"unix_ms\":5,"
            "\"message\":\"rank 1 idle\\n\\u003c/script\\u003e\"}],"
            "\"memory\":[{\"rank\":0,\"dp\":0,\"peak_bytes\":100,\"budget_bytes\":1000},"
            "{\"rank\":1,\"dp\":0,\"peak_bytes\":18446744073709551615,\"budget_bytes\":0}],"
            "\"scores\":[{\"rank\":1,\"dp\":0,\"op\":\"B\",\"relative\":0.5,\"individual\":0.75}],"
            "\"steps_recent\":[{\"step\":0,\"loss\":2.5,\"step_time_s\":0.125,\"bubble\":0.3}]}");
}

}  // namespace
}  // namespace pipecoord::coordinator::http
