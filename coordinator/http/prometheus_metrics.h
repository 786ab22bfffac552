// PrometheusMetrics: the coordinator's measurements as Prometheus metrics (prometheus-cpp), in
// base units with _total counters. The job is the label job_id (Prometheus keeps `job` for the
// scrape job):
//   pipecoord_step_duration_seconds{job_id}                     histogram
//   pipecoord_action_duration_seconds{job_id,rank,dp,stage,op}  histogram (jobs of more than
//     health::kPerRankSeriesMaxRanks ranks: {job_id,rank,stage,op}, summed over dp and tp)
//   pipecoord_bubble_ratio{job_id,source="measured"|"predicted"|"plan"}  gauge, 0..1 (predicted:
//     calibrated once the job is, else the plan's)
//   pipecoord_predicted_step_seconds{job_id,source="plan"|"calibrated"}  gauge
//   pipecoord_idle_seconds{job_id,rank,dp,cause="inherent"|"imbalance"|"variation"|"comm"}  gauge,
//     the last step's idle split (jobplan/idle_breakdown.h; variation may be negative)
//   pipecoord_straggler_score{job_id,rank,dp,op,score="relative"|"individual"}  gauge, 0..1
//   pipecoord_memory_peak_bytes{job_id,rank,dp}, pipecoord_memory_budget_bytes{job_id,rank,dp},
//   pipecoord_memory_reserved_bytes{job_id,rank,dp}
//   pipecoord_validation_loss{job_id,unit="nats"|"bits_per_byte"}  gauge, the last validation
//     (spec.evalEvery); bits_per_byte only for byte-level data (vocabulary 256)
//   pipecoord_grad_norm{job_id}, pipecoord_learning_rate{job_id}  gauges, the last step's global
//     gradient norm before clipping (backends that compute it) and learning rate
//   pipecoord_health_events_total{job_id,kind}, pipecoord_steps_total{job_id}   counters
//   pipecoord_recoveries_total{job_id,path="spare"}  counter, lost ranks recovered without a restart
//   pipecoord_recovery_seconds{job_id,path}  gauge, the last one's time from the loss being detected
//     to the first step measured after it
//   pipecoord_jobs{state}, pipecoord_workers{state="idle"|"busy"}          gauges
// Thread-safe (prometheus-cpp's families lock).
#ifndef PIPECOORD_COORDINATOR_HTTP_PROMETHEUS_METRICS_H_
#define PIPECOORD_COORDINATOR_HTTP_PROMETHEUS_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "coordinator/health/metrics_sink.h"
#include "proto/job.pb.h"

namespace pipecoord::coordinator::http {

class PrometheusMetrics final : public health::MetricsSink {
 public:
  PrometheusMetrics();

  void Action(const std::string& job, const health::RankLabel& at, int stage, const std::string& op, double seconds) override;
  void Step(const std::string& job, double step_seconds, double measured_bubble, double predicted_bubble) override;
  void Idle(const std::string& job, const health::RankLabel& at, double inherent, double imbalance, double variation,
            double comm) override;
  void Predicted(const std::string& job, double plan_step_s, double plan_bubble, double calibrated_step_s,
                 double calibrated_bubble) override;
  void Straggler(const std::string& job, const health::RankLabel& at, const std::string& op, double relative,
                 double individual) override;
  void Memory(const std::string& job, const health::RankLabel& at, uint64_t peak_bytes, uint64_t budget_bytes,
              uint64_t reserved_bytes) override;
  void Validation(const std::string& job, double loss_nats, double bits_per_byte) override;
  void Optimizer(const std::string& job, double grad_norm, double learning_rate) override;
  void Event(const std::string& job, const std::string& kind) override;
  void Recovery(const std::string& job, const std::string& path, double seconds) override;
  void ForgetJob(const std::string& job) override;

  // Sets the job and worker gauges from the coordinator's listings (before each scrape).
  void UpdateFleet(const std::vector<v1::Job>& jobs, const std::vector<v1::WorkerInfo>& workers);
  // The Prometheus text exposition format of every metric.
  std::string Serialize() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>& step_;
  prometheus::Family<prometheus::Histogram>& action_;
  prometheus::Family<prometheus::Gauge>& bubble_;
  prometheus::Family<prometheus::Gauge>& straggler_;
  prometheus::Family<prometheus::Gauge>& predicted_step_;
  prometheus::Family<prometheus::Gauge>& idle_;
  prometheus::Family<prometheus::Gauge>& peak_;
  prometheus::Family<prometheus::Gauge>& budget_;
  prometheus::Family<prometheus::Gauge>& reserved_;
  prometheus::Family<prometheus::Gauge>& validation_;
  prometheus::Family<prometheus::Gauge>& grad_norm_;
  prometheus::Family<prometheus::Gauge>& learning_rate_;
  prometheus::Family<prometheus::Counter>& events_;
  prometheus::Family<prometheus::Counter>& steps_;
  prometheus::Family<prometheus::Counter>& recoveries_;
  prometheus::Family<prometheus::Gauge>& recovery_seconds_;
  prometheus::Family<prometheus::Gauge>& jobs_;
  prometheus::Family<prometheus::Gauge>& workers_;
  // Action's series by job, then by (rank, dp, tp, stage, op) packed in 64 bits: the hot path
  // (every action of every rank, ~760k per step at 4,096 ranks) finds a series by numbers instead
  // of building and hashing a label map (Family::Add) each time.
  std::mutex action_mu_;
  std::unordered_map<std::string, std::unordered_map<uint64_t, prometheus::Histogram*>> action_series_;
  std::unordered_map<std::string, int> op_ids_;
};

}  // namespace pipecoord::coordinator::http

#endif  // PIPECOORD_COORDINATOR_HTTP_PROMETHEUS_METRICS_H_
