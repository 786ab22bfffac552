#include "coordinator/http/prometheus_metrics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "coordinator/coordinator.h"
#include "coordinator/health/metrics_aggregate.h"

namespace pipecoord::coordinator::http {
namespace {

// Occurrences of `needle` in `text`.
int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

void Feed(PrometheusMetrics& m, const std::string& job) {
  m.Action(job, {0, 0}, 0, "F", 0.001);
  m.Action(job, {1, 0}, 1, "B", 0.002);
  m.Step(job, 0.5, 0.2, 0.1);
  m.Straggler(job, {1, 0}, "B", 0.9, 1.0);
  m.Memory(job, {0, 0}, 1 << 20, 2 << 20, 3 << 20);
  m.Event(job, "LIFECYCLE");
  m.Idle(job, {1, 0}, 0.01, 0.02, -0.005, 0.003);
  m.Predicted(job, 0.4, 0.1, 0.45, 0.15);
}

TEST(PrometheusMetricsTest, IdleSplitAndPredictionsArePerCauseAndSource) {
  PrometheusMetrics m;
  Feed(m, "job-000001");
  const std::string text = m.Serialize();
  EXPECT_NE(text.find("pipecoord_idle_seconds{cause=\"variation\",dp=\"0\",job_id=\"job-000001\",rank=\"1\"} -0.005"),
            std::string::npos) << text;
  EXPECT_NE(text.find("pipecoord_idle_seconds{cause=\"imbalance\",dp=\"0\",job_id=\"job-000001\",rank=\"1\"} 0.02"),
            std::string::npos);
  EXPECT_NE(text.find("pipecoord_predicted_step_seconds{job_id=\"job-000001\",source=\"plan\"} 0.4"), std::string::npos);
  EXPECT_NE(text.find("pipecoord_predicted_step_seconds{job_id=\"job-000001\",source=\"calibrated\"} 0.45"),
            std::string::npos);
  EXPECT_NE(text.find("pipecoord_bubble_ratio{job_id=\"job-000001\",source=\"plan\"} 0.1"), std::string::npos);
}

TEST(PrometheusMetricsTest, MemoryHasPeakBudgetAndReservedPerRank) {
  PrometheusMetrics m;
  Feed(m, "job-000001");
  const std::string text = m.Serialize();
  EXPECT_NE(text.find("pipecoord_memory_peak_bytes{dp=\"0\",job_id=\"job-000001\",rank=\"0\"} 1048576"),
            std::string::npos) << text;
  EXPECT_NE(text.find("pipecoord_memory_budget_bytes{dp=\"0\",job_id=\"job-000001\",rank=\"0\"} 2097152"),
            std::string::npos);
  EXPECT_NE(text.find("pipecoord_memory_reserved_bytes{dp=\"0\",job_id=\"job-000001\",rank=\"0\"} 3145728"),
            std::string::npos);
}

// Tensor-parallel ranks of one pipeline rank and replica are series of their own ("tp" label);
// without tensor parallelism the labels stay rank and dp.
TEST(PrometheusMetricsTest, TensorParallelRanksHaveATpLabel) {
  PrometheusMetrics m;
  m.Memory("job-000001", {1, 0, 0}, 100, 200, 300);
  m.Memory("job-000001", {1, 0, 1}, 101, 200, 300);
  m.Action("job-000001", {1, 0, 1}, 1, "F", 0.5);
  const std::string text = m.Serialize();
  EXPECT_NE(text.find("pipecoord_memory_peak_bytes{dp=\"0\",job_id=\"job-000001\",rank=\"1\",tp=\"0\"} 100"),
            std::string::npos) << text;
  EXPECT_NE(text.find("pipecoord_memory_peak_bytes{dp=\"0\",job_id=\"job-000001\",rank=\"1\",tp=\"1\"} 101"),
            std::string::npos) << text;
  EXPECT_NE(text.find("pipecoord_action_duration_seconds_count{dp=\"0\",job_id=\"job-000001\",op=\"F\",rank=\"1\","
                      "stage=\"1\",tp=\"1\"} 1"),
            std::string::npos) << text;
}

// Each observation lands in its own series, whether the series is new or found again (the hot
// path keeps series by number), and a job's series are made anew after the job is forgotten.
TEST(PrometheusMetricsTest, ActionObservationsCountPerSeriesAcrossForget) {
  PrometheusMetrics m;
  for (int k = 0; k < 5; ++k) {
    m.Action("job-000001", {0, 0}, 0, "F", 0.001);
    m.Action("job-000001", {0, 1}, 0, "F", 0.001);  // another replica: its own series
    m.Action("job-000001", {0, 0}, 0, "B", 0.002);
  }
  m.Action("job-000001", {0, 1}, 0, "F", 0.001);
  std::string text = m.Serialize();
  EXPECT_NE(text.find("pipecoord_action_duration_seconds_count{dp=\"0\",job_id=\"job-000001\",op=\"F\",rank=\"0\","
                      "stage=\"0\"} 5"),
            std::string::npos) << text;
  EXPECT_NE(text.find("pipecoord_action_duration_seconds_count{dp=\"1\",job_id=\"job-000001\",op=\"F\",rank=\"0\","
                      "stage=\"0\"} 6"),
            std::string::npos);
  EXPECT_NE(text.find("pipecoord_action_duration_seconds_count{dp=\"0\",job_id=\"job-000001\",op=\"B\",rank=\"0\","
                      "stage=\"0\"} 5"),
            std::string::npos);
  m.ForgetJob("job-000001");
  EXPECT_EQ(Count(m.Serialize(), "job-000001"), 0);
  m.Action("job-000001", {0, 0}, 0, "F", 0.001);
  text = m.Serialize();
  EXPECT_NE(text.find("pipecoord_action_duration_seconds_count{dp=\"0\",job_id=\"job-000001\",op=\"F\",rank=\"0\","
                      "stage=\"0\"} 1"),
            std::string::npos) << text;
}

// A job of more than kPerRankSeriesMaxRanks ranks: one action series per pipeline rank,
// stage and op, holding every replica's and shard's observations (no dp or tp label).
TEST(PrometheusMetricsTest, ABigJobsActionsAreSummedOverReplicasAndShards) {
  PrometheusMetrics m;
  const RankLayout big = RankLayout::OfDegrees(/*pp=*/2, /*dp=*/64, /*tp=*/8);
  ASSERT_GT(big.world(), health::kPerRankSeriesMaxRanks);
  for (int g = 0; g < big.world(); ++g) m.Action("job-000002", health::ActionLabelOf(big, g), 0, "F", 0.001);
  const std::string text = m.Serialize();
  EXPECT_NE(text.find("pipecoord_action_duration_seconds_count{job_id=\"job-000002\",op=\"F\",rank=\"0\",stage=\"0\"} 512"),
            std::string::npos) << text.substr(0, 2000);
  EXPECT_NE(text.find("pipecoord_action_duration_seconds_count{job_id=\"job-000002\",op=\"F\",rank=\"1\",stage=\"0\"} 512"),
            std::string::npos);
  EXPECT_EQ(Count(text, "pipecoord_action_duration_seconds_count{"), 2);
  // A small job keeps a series per rank.
  const RankLayout small = RankLayout::OfDegrees(2, 4, 2);
  for (int g = 0; g < small.world(); ++g) m.Action("job-000003", health::ActionLabelOf(small, g), 0, "F", 0.001);
  EXPECT_EQ(Count(m.Serialize(), "pipecoord_action_duration_seconds_count{dp="), small.world());
}

// The gauges of a big job through the monitor's aggregate: one memory, idle and straggler series
// per pipeline rank (no dp label) where a small job has one per rank.
TEST(PrometheusMetricsTest, ABigJobsGaugesArePerPipelineRank) {
  PrometheusMetrics m;
  const RankLayout big = RankLayout::OfDegrees(/*pp=*/4, /*dp=*/256, /*tp=*/4);
  health::PipelineRankAggregate agg(big, "job-000004", &m);
  for (int g = 0; g < big.world(); ++g) {
    agg.Memory(g, 1, 1000 + g, 5000, 2000);
    agg.AddIdle(health::LabelOf(big, g), 0.01, 0.0, 0.0, 0.001);
    agg.AddStraggler(g, "F", 0.9, 0.95);
  }
  agg.FlushIdle();
  agg.FlushStraggler();
  const std::string text = m.Serialize();
  EXPECT_EQ(Count(text, "pipecoord_memory_peak_bytes{"), big.pp());
  EXPECT_EQ(Count(text, "pipecoord_idle_seconds{"), 4 * big.pp());
  EXPECT_EQ(Count(text, "pipecoord_straggler_score{"), 2 * big.pp());
  // The highest peak of pipeline rank 3: its last replica's, dp 255, tp 3.
  const int last = big.Global({3, 255, 3});
  EXPECT_NE(text.find("pipecoord_memory_peak_bytes{job_id=\"job-000004\",rank=\"3\"} " + std::to_string(1000 + last)),
            std::string::npos) << text.substr(0, 3000);
  EXPECT_EQ(text.find("dp=\""), std::string::npos);
}

TEST(PrometheusMetricsTest, ValidationLossInNatsAndBitsPerByte) {
  PrometheusMetrics m;
  m.Validation("job-000001", 1.5, 1.5 / std::log(2.0));
  m.Validation("job-000002", 2.25, -1);  // not byte-level: nats only
  const std::string text = m.Serialize();
  EXPECT_NE(text.find("pipecoord_validation_loss{job_id=\"job-000001\",unit=\"nats\"} 1.5"), std::string::npos) << text;
  EXPECT_NE(text.find("pipecoord_validation_loss{job_id=\"job-000001\",unit=\"bits_per_byte\"} 2.16404"),
            std::string::npos) << text;
  EXPECT_NE(text.find("pipecoord_validation_loss{job_id=\"job-000002\",unit=\"nats\"} 2.25"), std::string::npos);
  EXPECT_EQ(text.find("pipecoord_validation_loss{job_id=\"job-000002\",unit=\"bits_per_byte\"}"), std::string::npos);
  m.ForgetJob("job-000001");
  EXPECT_EQ(m.Serialize().find("job-000001"), std::string::npos);
}

TEST(PrometheusMetricsTest, GradientNormAndLearningRate) {
  PrometheusMetrics m;
  m.Optimizer("job-000001", 0.75, 3e-4);
  m.Optimizer("job-000002", -1, 0.01);  // a backend that computes no norm: the learning rate only
  const std::string text = m.Serialize();
  EXPECT_NE(text.find("pipecoord_grad_norm{job_id=\"job-000001\"} 0.75"), std::string::npos) << text;
  EXPECT_NE(text.find("pipecoord_learning_rate{job_id=\"job-000001\"} 0.0003"), std::string::npos) << text;
  EXPECT_EQ(text.find("pipecoord_grad_norm{job_id=\"job-000002\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("pipecoord_learning_rate{job_id=\"job-000002\"} 0.01"), std::string::npos) << text;
  m.ForgetJob("job-000001");
  EXPECT_EQ(m.Serialize().find("job-000001"), std::string::npos);
}

TEST(PrometheusMetricsTest, RecoveriesCountedByPathWithTheLastDuration) {
  PrometheusMetrics m;
  m.Recovery("job-000001", "spare", 1.5);
  m.Recovery("job-000001", "spare", 0.25);
  m.Recovery("job-000001", "shrink", 2);
  const std::string text = m.Serialize();
  EXPECT_NE(text.find("pipecoord_recoveries_total{job_id=\"job-000001\",path=\"spare\"} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("pipecoord_recoveries_total{job_id=\"job-000001\",path=\"shrink\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("pipecoord_recovery_seconds{job_id=\"job-000001\",path=\"spare\"} 0.25"), std::string::npos) << text;
  m.ForgetJob("job-000001");
  EXPECT_EQ(m.Serialize().find("job-000001"), std::string::npos);
}

TEST(PrometheusMetricsTest, AForgottenJobLeavesNoSeriesAndOthersStay) {
  PrometheusMetrics m;
  Feed(m, "job-000001");
  Feed(m, "job-000002");
  const std::string before = m.Serialize();
  const int per_job = Count(before, "job_id=\"job-000001\"");
  ASSERT_GT(per_job, 40);  // histograms' buckets, sums and counts included
  EXPECT_EQ(Count(before, "job_id=\"job-000002\""), per_job);

  m.ForgetJob("job-000001");
  const std::string after = m.Serialize();
  EXPECT_EQ(Count(after, "job_id=\"job-000001\""), 0) << after;
  EXPECT_EQ(Count(after, "job_id=\"job-000002\""), per_job);
  EXPECT_NE(after.find("pipecoord_steps_total{job_id=\"job-000002\"} 1"), std::string::npos) << after;

  // A job id seen again starts from zero.
  m.Step("job-000001", 0.5, 0.2, 0.1);
  EXPECT_NE(m.Serialize().find("pipecoord_steps_total{job_id=\"job-000001\"} 1"), std::string::npos);
}

TEST(PrometheusMetricsTest, TheCoordinatorForgetsTheSeriesOfAJobItDrops) {
  PrometheusMetrics m;
  CoordinatorOptions o;
  o.metrics = &m;
  o.max_jobs = 1;
  Coordinator c(o);
  v1::JobSpec spec;
  spec.set_schedule("1f1b");
  spec.set_pp(1);
  spec.set_microbatches(1);
  spec.set_micro_batch_size(1);
  spec.set_steps(1);
  auto* model = spec.mutable_model();
  model->set_layers(1);
  model->set_hidden(8);
  model->set_heads(2);
  model->set_vocab(16);
  model->set_seq_len(4);
  const std::string first = c.SubmitJob(spec)->job_id();
  ASSERT_TRUE(c.CancelJob(first).ok());  // its lifecycle events are series now
  ASSERT_GT(Count(m.Serialize(), "job_id=\"" + first + "\""), 0);
  const std::string second = c.SubmitJob(spec)->job_id();  // room: the first one goes
  EXPECT_EQ(c.GetJob(first).status().code(), Code::kNotFound);
  EXPECT_EQ(Count(m.Serialize(), "job_id=\"" + first + "\""), 0);
  EXPECT_GT(Count(m.Serialize(), "job_id=\"" + second + "\""), 0);
}

}  // namespace
}  // namespace pipecoord::coordinator::http
