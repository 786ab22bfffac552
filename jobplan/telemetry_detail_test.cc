// What a worker sends of a step (jobplan/telemetry_detail.h): whole on the detailed steps,
// folded by kind elsewhere, where the totals must equal sums taken over the actions one by one.
#include "jobplan/telemetry_detail.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "jobplan/health_settings.h"

namespace pipecoord::jobplan {
namespace {

std::vector<v1::ActionTiming> RandomStep(int step, std::mt19937& rng) {
  const v1::Op ops[] = {v1::F, v1::B, v1::W, v1::SEND_F, v1::RECV_B, v1::PROBE, v1::OPT};
  std::vector<v1::ActionTiming> out;
  int64_t t = 1'000'000;
  for (int i = 0; i < 60; ++i) {
    v1::ActionTiming a;
    a.set_step(step);
    a.mutable_action()->set_op(ops[rng() % 7]);
    a.mutable_action()->set_stage(static_cast<int>(rng() % 3));
    a.mutable_action()->set_microbatch(i);
    t += rng() % 1000;
    a.set_start_ns(t);
    t += 1 + rng() % 100000;
    a.set_end_ns(t);
    a.set_wait_ns(rng() % 5000);
    a.set_tp_comm_ns(rng() % 700);
    a.set_tp_comm_bytes(rng() % 4096);
    a.set_dp_comm_bytes(rng() % 8192);
    a.set_recompute_ns(rng() % 300);
    a.set_probe_checksum(rng());
    out.push_back(a);
  }
  return out;
}

TEST(TelemetryDetailTest, AFoldedStepsTotalsAreItsActionsSummedByKindAndItsProbesStayWhole) {
  std::mt19937 rng(7);
  TelemetryDetail detail;
  detail.every = 4;
  for (int step : {1, 5}) {
    const std::vector<v1::ActionTiming> actions = RandomStep(step, rng);
    v1::TelemetryBatch b;
    PutStepTimings(detail, 0, 0, step, actions, &b);
    int probes = 0, folded = 0;
    for (const v1::ActionTiming& a : actions) {
      if (a.action().op() == v1::PROBE) {
        ASSERT_LT(probes, b.actions_size());
        EXPECT_EQ(b.actions(probes++).SerializeAsString(), a.SerializeAsString());
        continue;
      }
      ++folded;
    }
    EXPECT_EQ(b.actions_size(), probes);
    int counted = 0;
    for (const v1::ActionTotals& k : b.totals()) {
      EXPECT_EQ(k.step(), step);
      int n = 0;
      int64_t first = INT64_MAX, last = 0, busy = 0, fastest = INT64_MAX, wait = 0, tp_ns = 0, rc = 0;
      uint64_t tp_bytes = 0, dp_bytes = 0;
      for (const v1::ActionTiming& a : actions) {
        if (a.action().stage() != k.stage() || a.action().op() != k.op()) continue;
        ++n;
        first = std::min(first, a.start_ns());
        last = std::max(last, a.end_ns());
        busy += a.end_ns() - a.start_ns();
        fastest = std::min(fastest, a.end_ns() - a.start_ns());
        wait += a.wait_ns();
        tp_ns += a.tp_comm_ns();
        rc += a.recompute_ns();
        tp_bytes += a.tp_comm_bytes();
        dp_bytes += a.dp_comm_bytes();
      }
      EXPECT_NE(k.op(), v1::PROBE);
      EXPECT_EQ(k.count(), n);
      EXPECT_EQ(k.first_start_ns(), first);
      EXPECT_EQ(k.last_end_ns(), last);
      EXPECT_EQ(k.busy_ns(), busy);
      EXPECT_EQ(k.fastest_ns(), fastest);
      EXPECT_EQ(k.wait_ns(), wait);
      EXPECT_EQ(k.tp_comm_ns(), tp_ns);
      EXPECT_EQ(k.recompute_ns(), rc);
      EXPECT_EQ(k.tp_comm_bytes(), tp_bytes);
      EXPECT_EQ(k.dp_comm_bytes(), dp_bytes);
      counted += k.count();
    }
    EXPECT_EQ(counted, folded);
  }
  // A detailed step (every 4th) goes whole, in order; a silent tp rank sends nothing.
  const std::vector<v1::ActionTiming> actions = RandomStep(8, rng);
  v1::TelemetryBatch whole, silent;
  PutStepTimings(detail, 0, 0, 8, actions, &whole);
  ASSERT_EQ(whole.actions_size(), static_cast<int>(actions.size()));
  EXPECT_EQ(whole.totals_size(), 0);
  for (size_t i = 0; i < actions.size(); ++i) EXPECT_EQ(whole.actions(i).SerializeAsString(), actions[i].SerializeAsString());
  detail.tp_speaker = true;
  PutStepTimings(detail, 0, 1, 8, actions, &silent);
  EXPECT_EQ(silent.ByteSizeLong(), 0u);
  // With the first replica only, replica 1 folds the same step.
  detail.first_replica = true;
  v1::TelemetryBatch other;
  PutStepTimings(detail, 1, 0, 8, actions, &other);
  EXPECT_GT(other.totals_size(), 0);
  int kept = 0;
  for (const v1::ActionTiming& a : actions) kept += a.action().op() == v1::PROBE;
  EXPECT_EQ(other.actions_size(), kept);
}

TEST(TelemetryDetailTest, LargeJobsFoldAndSpeakByDefaultSmallOnesDoNot) {
  v1::JobSpec small;
  small.set_pp(16);
  small.set_dp(8);
  small.set_tp(4);  // 512 ranks
  const TelemetryDetail s = TelemetryDetailOf(small);
  EXPECT_EQ(s.every, 1);
  EXPECT_FALSE(s.tp_speaker);
  EXPECT_FALSE(s.first_replica);
  EXPECT_EQ(s.first, 4);  // warm-up 1 + calibration 3
  v1::JobSpec large = small;
  large.set_dp(16);  // 1,024 ranks
  TelemetryDetail l = TelemetryDetailOf(large);
  EXPECT_EQ(l.every, kDefaultDetailEvery);
  EXPECT_TRUE(l.tp_speaker);
  EXPECT_TRUE(l.first_replica);
  EXPECT_EQ(SpeakerGroup(large), 4);
  EXPECT_TRUE(l.InDetail(3));
  EXPECT_FALSE(l.InDetail(4));
  EXPECT_TRUE(l.InDetail(32));
  large.mutable_health()->set_detail_every(5);
  large.mutable_health()->set_detail_from(100);
  large.mutable_health()->set_detail_steps(3);
  large.mutable_health()->set_tp_speaker("off");
  large.mutable_health()->set_detail_replicas("all");
  l = TelemetryDetailOf(large);
  EXPECT_EQ(l.every, 5);
  EXPECT_FALSE(l.tp_speaker);
  EXPECT_FALSE(l.first_replica);
  EXPECT_EQ(SpeakerGroup(large), 1);
  EXPECT_TRUE(l.InDetail(101));
  EXPECT_FALSE(l.InDetail(103));
  EXPECT_TRUE(l.InDetail(105));
  small.mutable_health()->set_tp_speaker("on");
  EXPECT_TRUE(TelemetryDetailOf(small).tp_speaker);
}

TEST(TelemetryDetailTest, BadSettingsNameTheFieldAndTheRule) {
  v1::HealthConfig c;
  c.set_detail_every(-2);
  EXPECT_EQ(ValidateHealthConfig(c).message(), "spec.health.detailEvery: must be in [0, 1e+06], got -2");
  c.set_detail_every(0);
  c.set_detail_steps(-1);
  EXPECT_EQ(ValidateHealthConfig(c).message(), "spec.health.detailSteps: must be in [0, 1e+09], got -1");
  c.set_detail_steps(0);
  c.set_tp_speaker("yes");
  EXPECT_EQ(ValidateHealthConfig(c).code(), Code::kInvalidArgument);
  EXPECT_EQ(ValidateHealthConfig(c).message(), "spec.health.tpSpeaker: must be \"on\", \"off\" or unset, got \"yes\"");
  c.set_tp_speaker("");
  c.set_detail_replicas("some");
  EXPECT_EQ(ValidateHealthConfig(c).message(),
            "spec.health.detailReplicas: must be \"all\", \"first\" or unset, got \"some\"");
}

}  // namespace
}  // namespace pipecoord::jobplan
