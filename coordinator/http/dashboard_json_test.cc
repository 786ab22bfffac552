#include "coordinator/http/dashboard_json.h"

#include <gtest/gtest.h>

#include <cmath>

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
  h.replays_checked = 1;
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
            "\"schedule\":\"1f1b\",\"pp\":2,\"dp\":1,\"steps_done\":1,\"steps\":4,\"failure_cause\":\"\",\"recovering\":\"\",\"recoveries\":0,\"restarts\":0,"
            "\"predicted_bubble_rate\":0.25,\"clip_grad_norm\":0,"
            "\"health\":{\"enabled\":true,\"seconds_per_cost\":0.25,\"predicted_step_s\":1.5,"
            "\"hang_deadline_s\":null,\"probes_checked\":2,\"replays_checked\":1},"
            "\"timeline\":{\"actions\":[{\"rank\":1,\"dp\":0,\"row\":1,\"step\":7,\"op\":\"BW\",\"stage\":1,"
            "\"mb\":3,\"start_s\":0,\"end_s\":0.5,\"wait_s\":0.25}],"
            "\"predicted_idle\":[{\"row\":1,\"step\":7,\"start_s\":0,\"end_s\":0.5}]},"
            "\"events\":[{\"kind\":\"BUBBLE\",\"rank\":1,\"dp\":0,\"step\":0,\"unix_ms\":5,"
            "\"message\":\"rank 1 idle\\n\\u003c/script\\u003e\"}],"
            "\"memory\":[{\"rank\":0,\"dp\":0,\"peak_bytes\":100,\"budget_bytes\":1000},"
            "{\"rank\":1,\"dp\":0,\"peak_bytes\":18446744073709551615,\"budget_bytes\":0}],"
            "\"scores\":[{\"rank\":1,\"dp\":0,\"op\":\"B\",\"relative\":0.5,\"individual\":0.75}],"
            "\"series\":{\"step\":[0],\"loss\":[2.5],\"grad_norm\":[null],\"learning_rate\":[0],\"step_time_s\":[0.125],\"bubble\":[0.3],"
            "\"predicted_step_s\":[null],\"predicted_bubble\":[null],\"idle\":{\"inherent_s\":[null],"
            "\"imbalance_s\":[null],\"variation_s\":[null],\"comm_s\":[null],\"cause_rank\":[-1]},"
            "\"peak_bytes\":[[null],[null]]},\"budget_bytes\":[0,0],\"calibration\":null,\"rebalance\":null}");
}

// The curves' part of the detail for a calibrated pp 2 x dp 2 job with a rebalance proposal.
TEST(DashboardJsonTest, JobCurvesExact) {
  v1::Job j;
  j.set_id("job-3");
  j.mutable_spec()->set_pp(2);
  j.mutable_spec()->set_dp(2);
  v1::Plan* plan = j.mutable_plan();
  plan->add_memory_budget_bytes(1000);
  plan->add_memory_budget_bytes(2000);
  for (int rank : {0, 1, 1, 0}) plan->add_stage_to_rank(rank);  // V-shape
  for (int layers : {3, 1, 2, 2}) {
    v1::StageShard* sh = plan->add_shards();
    sh->set_stage(plan->shards_size() - 1);
    sh->set_num_layers(layers);
  }
  // Step 0: measured only (nothing predicted or split yet).
  v1::StepRecord* s = j.add_steps();
  s->set_step(0);
  s->set_loss(2.5);
  s->set_step_time_s(0.125);
  s->set_measured_bubble_rate(0.3);
  s->add_peak_memory_bytes(100);
  s->add_peak_memory_bytes(200);
  // Step 1: a prediction with a real bubble rate of 0, the idle split, one rank's peak only.
  s = j.add_steps();
  s->set_step(1);
  s->set_loss(2.25);
  s->set_step_time_s(0.25);
  s->set_measured_bubble_rate(0.5);
  s->set_predicted_step_s(0.2);
  s->set_predicted_bubble_rate(0);
  v1::IdleSplit* idle = s->mutable_idle_total();
  idle->set_inherent_s(0.01);
  idle->set_imbalance_s(0.02);
  idle->set_variation_s(-0.005);
  idle->set_comm_s(0.001);
  idle->set_cause_rank(1);
  s->add_peak_memory_bytes(150);
  // Step 2: a loss that is not finite.
  s = j.add_steps();
  s->set_step(2);
  s->set_loss(std::numeric_limits<double>::infinity());
  s->set_step_time_s(0.5);
  s->set_measured_bubble_rate(0.25);
  s->set_predicted_step_s(0.375);
  s->set_predicted_bubble_rate(0.125);
  s->add_peak_memory_bytes(300);
  s->add_peak_memory_bytes(400);
  v1::Calibration* c = j.mutable_calibration();
  c->set_steps_measured(3);
  c->add_stage_f_s(0.01);
  c->add_stage_f_s(0.02);
  c->add_stage_b_s(0.03);
  c->set_comm_s(0.001);
  c->set_predicted_step_s(0.375);
  c->set_predicted_bubble_rate(0.125);
  c->set_plan_step_s(0.5);
  v1::RebalanceProposal* r = j.mutable_rebalance();
  r->add_stage_layers(4);
  r->add_stage_layers(4);
  r->set_schedule("1f1b");
  r->set_current_step_s(0.5);
  r->set_proposed_step_s(0.4);
  r->set_gain(0.2);
  r->set_reason("rank 0 <slow>");
  const std::string json = JobDetailJson(j, health::HealthSnapshot{});
  const size_t at = json.find(",\"series\":");
  ASSERT_NE(at, std::string::npos) << json;
  EXPECT_EQ(json.substr(at),
            ",\"series\":{\"step\":[0,1,2],\"loss\":[2.5,2.25,null],\"grad_norm\":[null,null,null],\"learning_rate\":[0,0,0],\"step_time_s\":[0.125,0.25,0.5],"
            "\"bubble\":[0.3,0.5,0.25],\"predicted_step_s\":[null,0.2,0.375],\"predicted_bubble\":[null,0,0.125],"
            "\"idle\":{\"inherent_s\":[null,0.01,null],\"imbalance_s\":[null,0.02,null],"
            "\"variation_s\":[null,-0.005,null],\"comm_s\":[null,0.001,null],\"cause_rank\":[-1,1,-1]},"
            "\"peak_bytes\":[[100,150,300],[200,null,400],[null,null,null],[null,null,null]]},"
            "\"budget_bytes\":[1000,2000,1000,2000],"
            "\"calibration\":{\"steps_measured\":3,\"predicted_step_s\":0.375,\"predicted_bubble_rate\":0.125,"
            "\"plan_step_s\":0.5,\"comm_s\":0.001,\"stage_f_s\":[0.01,0.02],\"stage_b_s\":[0.03],\"stage_w_s\":[]},"
            "\"rebalance\":{\"current_stage_layers\":[5,3],\"stage_layers\":[4,4],\"schedule\":\"1f1b\","
            "\"current_step_s\":0.5,\"proposed_step_s\":0.4,\"gain\":0.2,\"reason\":\"rank 0 \\u003cslow\\u003e\"}}");
}

// A job with validation (spec.evalEvery) on byte-level data: the validation curve in nats and
// bits per byte, null on the steps without a validation pass.
// The gradient norm per step (null where a backend computed none), the learning rate, and the
// clipping threshold the chart draws as a level.
TEST(DashboardJsonTest, GradientNormAndLearningRateCurves) {
  v1::Job j;
  j.set_id("job-000004");
  j.mutable_spec()->set_pp(1);
  j.mutable_spec()->mutable_optimizer()->set_clip_grad_norm(0.5);
  for (int step = 0; step < 2; ++step) {
    v1::StepRecord* s = j.add_steps();
    s->set_step(step);
    s->set_loss(3);
    s->set_learning_rate(step == 0 ? 0.001 : 0.002);
    if (step == 0) {
      s->set_grad_norm(1.5);
      s->set_has_grad_norm(true);
    }
  }
  const std::string json = JobDetailJson(j, health::HealthSnapshot{});
  EXPECT_NE(json.find("\"loss\":[3,3],\"grad_norm\":[1.5,null],\"learning_rate\":[0.001,0.002],"), std::string::npos) << json;
  EXPECT_NE(json.find("\"clip_grad_norm\":0.5,"), std::string::npos) << json;
}

TEST(DashboardJsonTest, ValidationCurveOnlyWhenTheJobHasOne) {
  v1::Job j;
  j.set_id("job-000003");
  j.mutable_spec()->set_pp(1);
  j.mutable_spec()->mutable_model()->set_vocab(256);
  j.mutable_spec()->mutable_data()->set_path("/d");
  for (int step = 0; step < 3; ++step) {
    v1::StepRecord* s = j.add_steps();
    s->set_step(step);
    s->set_loss(3);
    if (step != 1) {
      s->set_val_loss(step == 0 ? std::log(4.0) : std::log(2.0));
      s->set_has_val_loss(true);
    }
  }
  const std::string json = JobDetailJson(j, health::HealthSnapshot{});
  EXPECT_NE(json.find("\"loss\":[3,3,3],\"val_loss\":[1.3862943611198906,null,0.6931471805599453],"
                      "\"val_bits_per_byte\":[2,null,1],\"grad_norm\":[null,null,null],\"learning_rate\":[0,0,0],\"step_time_s\""),
            std::string::npos)
      << json;
  // Not byte-level: nats only. No validation at all: no key (the other curves' tests above).
  j.mutable_spec()->mutable_model()->set_vocab(300);
  EXPECT_EQ(JobDetailJson(j, health::HealthSnapshot{}).find("val_bits_per_byte"), std::string::npos);
}

}  // namespace
}  // namespace pipecoord::coordinator::http
