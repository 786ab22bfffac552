#include "coordinator/http/prometheus_metrics.h"

#include <prometheus/text_serializer.h>

#include <sstream>

namespace pipecoord::coordinator::http {
namespace {

using prometheus::Histogram;

Histogram::BucketBoundaries Exponential(double start, double factor, int count) {
  Histogram::BucketBoundaries b;
  for (int i = 0; i < count; ++i, start *= factor) b.push_back(start);
  return b;
}

const Histogram::BucketBoundaries& StepBuckets() {
  static const auto b = Exponential(0.001, 2, 18);  // 1 ms .. 131 s
  return b;
}
const Histogram::BucketBoundaries& ActionBuckets() {
  static const auto b = Exponential(1e-5, 2.5, 16);  // 10 us .. 9.3 s
  return b;
}

// Removes every series of `family` labelled job_id=`job`. prometheus-cpp removes by pointer and
// Add() of an existing label set returns that series, so the label sets come from Collect().
template <typename T, typename... Args>
void RemoveJob(prometheus::Family<T>& family, const std::string& job, const Args&... args) {
  for (const prometheus::MetricFamily& mf : family.Collect()) {
    for (const prometheus::ClientMetric& m : mf.metric) {
      prometheus::Labels labels;
      for (const prometheus::ClientMetric::Label& l : m.label) labels[l.name] = l.value;
      const auto it = labels.find("job_id");
      if (it != labels.end() && it->second == job) family.Remove(&family.Add(labels, args...));
    }
  }
}

}  // namespace

PrometheusMetrics::PrometheusMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      step_(prometheus::BuildHistogram()
                .Name("pipecoord_step_duration_seconds")
                .Help("Time of one optimizer step, first action start to last action end over all ranks")
                .Register(*registry_)),
      action_(prometheus::BuildHistogram()
                  .Name("pipecoord_action_duration_seconds")
                  .Help("Measured duration of each action of the job lists, per rank, stage and op")
                  .Register(*registry_)),
      bubble_(prometheus::BuildGauge()
                  .Name("pipecoord_bubble_ratio")
                  .Help("Bubble rate of the last step: 1 - busy / (ranks x step time); source measured or predicted")
                  .Register(*registry_)),
      straggler_(prometheus::BuildGauge()
                     .Name("pipecoord_straggler_score")
                     .Help("Straggler scores in [0, 1] (nvidia-resiliency-ext): relative and individual, per op")
                     .Register(*registry_)),
      predicted_step_(prometheus::BuildGauge()
                          .Name("pipecoord_predicted_step_seconds")
                          .Help("Predicted step time: the plan's (makespan x seconds per cost unit) and, once the job "
                                "is calibrated on measured costs, the calibrated one")
                          .Register(*registry_)),
      idle_(prometheus::BuildGauge()
                .Name("pipecoord_idle_seconds")
                .Help("A rank's idle time in the last step by cause: inherent (the schedule), imbalance (unequal "
                      "stages), variation (a slow or noisy rank; may be negative), comm (transfers, sends, OPT)")
                .Register(*registry_)),
      peak_(prometheus::BuildGauge()
                .Name("pipecoord_memory_peak_bytes")
                .Help("Peak memory a rank reported for its last step")
                .Register(*registry_)),
      budget_(prometheus::BuildGauge()
                  .Name("pipecoord_memory_budget_bytes")
                  .Help("The plan's memory budget for the rank")
                  .Register(*registry_)),
      reserved_(prometheus::BuildGauge()
                    .Name("pipecoord_memory_reserved_bytes")
                    .Help("Memory a rank's backend holds, in use or cached for reuse, after its last step "
                          "(the CUDA caching allocator's reserved bytes; the CPU backend's in-use bytes)")
                    .Register(*registry_)),
      validation_(prometheus::BuildGauge()
                      .Name("pipecoord_validation_loss")
                      .Help("The last validation loss (spec.evalEvery): mean next-token loss over the validation "
                            "batches, in nats, and in bits per byte for byte-level data")
                      .Register(*registry_)),
      grad_norm_(prometheus::BuildGauge()
                     .Name("pipecoord_grad_norm")
                     .Help("The last step's global gradient norm (L2 over every rank's gradients after the "
                           "data-parallel reduction, before clipping)")
                     .Register(*registry_)),
      learning_rate_(prometheus::BuildGauge()
                         .Name("pipecoord_learning_rate")
                         .Help("The learning rate of the last step's optimizer update (spec.optimizer's schedule)")
                         .Register(*registry_)),
      events_(prometheus::BuildCounter()
                  .Name("pipecoord_health_events_total")
                  .Help("Job events by kind (LIFECYCLE, BUBBLE, STRAGGLER, HANG, MEMORY, SDC)")
                  .Register(*registry_)),
      steps_(prometheus::BuildCounter()
                 .Name("pipecoord_steps_total")
                 .Help("Steps every rank of the job finished")
                 .Register(*registry_)),
      recoveries_(prometheus::BuildCounter()
                      .Name("pipecoord_recoveries_total")
                      .Help("Lost ranks recovered without a restart, by path (spare: taken over in place by a free "
                            "worker with its replica's state)")
                      .Register(*registry_)),
      recovery_seconds_(prometheus::BuildGauge()
                            .Name("pipecoord_recovery_seconds")
                            .Help("The last recovery's time from the loss being detected to the first step measured "
                                  "after it")
                            .Register(*registry_)),
      jobs_(prometheus::BuildGauge().Name("pipecoord_jobs").Help("Stored jobs by state").Register(*registry_)),
      workers_(prometheus::BuildGauge()
                   .Name("pipecoord_workers")
                   .Help("Registered workers, idle or busy")
                   .Register(*registry_)) {}

void PrometheusMetrics::ForgetJob(const std::string& job) {
  RemoveJob(step_, job, StepBuckets());
  {
    std::lock_guard<std::mutex> lock(action_mu_);
    action_series_.erase(job);  // before its series go
    RemoveJob(action_, job, ActionBuckets());
  }
  RemoveJob(bubble_, job);
  RemoveJob(straggler_, job);
  RemoveJob(predicted_step_, job);
  RemoveJob(idle_, job);
  RemoveJob(peak_, job);
  RemoveJob(budget_, job);
  RemoveJob(reserved_, job);
  RemoveJob(validation_, job);
  RemoveJob(grad_norm_, job);
  RemoveJob(learning_rate_, job);
  RemoveJob(events_, job);
  RemoveJob(steps_, job);
  RemoveJob(recoveries_, job);
  RemoveJob(recovery_seconds_, job);
}

// A per-rank series' labels: job_id, rank, dp (unless summed over replicas: dp < 0), tp (jobs
// with tensor parallelism only), then `more`.
std::map<std::string, std::string> Labels(const std::string& job, const health::RankLabel& at,
                                          std::initializer_list<std::pair<const std::string, std::string>> more) {
  std::map<std::string, std::string> l{{"job_id", job}, {"rank", std::to_string(at.rank)}};
  if (at.dp >= 0) l["dp"] = std::to_string(at.dp);
  if (at.tp >= 0) l["tp"] = std::to_string(at.tp);
  l.insert(more);
  return l;
}

void PrometheusMetrics::Action(const std::string& job, const health::RankLabel& at, int stage, const std::string& op,
                               double seconds) {
  std::lock_guard<std::mutex> lock(action_mu_);
  const int op_id = op_ids_.emplace(op, static_cast<int>(op_ids_.size())).first->second;
  // 16 bits of pipeline rank, 20 of replica, 12 of shard, 10 of stage, 6 of op (each + 1, so -1 fits).
  const bool fits = at.rank >= -1 && at.rank < (1 << 16) - 1 && at.dp >= -1 && at.dp < (1 << 20) - 1 && at.tp >= -1 &&
                    at.tp < (1 << 12) - 1 && stage >= -1 && stage < (1 << 10) - 1 && op_id < (1 << 6);
  if (!fits) {
    action_.Add(Labels(job, at, {{"stage", std::to_string(stage)}, {"op", op}}), ActionBuckets()).Observe(seconds);
    return;
  }
  const uint64_t key = (uint64_t(at.rank + 1) << 48) | (uint64_t(at.dp + 1) << 28) | (uint64_t(at.tp + 1) << 16) |
                       (uint64_t(stage + 1) << 6) | uint64_t(op_id);
  prometheus::Histogram*& series = action_series_[job][key];
  if (series == nullptr) {
    series = &action_.Add(Labels(job, at, {{"stage", std::to_string(stage)}, {"op", op}}), ActionBuckets());
  }
  series->Observe(seconds);
}

void PrometheusMetrics::Step(const std::string& job, double step_seconds, double measured, double predicted) {
  step_.Add({{"job_id", job}}, StepBuckets()).Observe(step_seconds);
  steps_.Add({{"job_id", job}}).Increment();
  bubble_.Add({{"job_id", job}, {"source", "measured"}}).Set(measured);
  bubble_.Add({{"job_id", job}, {"source", "predicted"}}).Set(predicted);
}

void PrometheusMetrics::Idle(const std::string& job, const health::RankLabel& at, double inherent, double imbalance,
                             double variation, double comm) {
  idle_.Add(Labels(job, at, {{"cause", "inherent"}})).Set(inherent);
  idle_.Add(Labels(job, at, {{"cause", "imbalance"}})).Set(imbalance);
  idle_.Add(Labels(job, at, {{"cause", "variation"}})).Set(variation);
  idle_.Add(Labels(job, at, {{"cause", "comm"}})).Set(comm);
}

void PrometheusMetrics::Validation(const std::string& job, double loss_nats, double bits_per_byte) {
  validation_.Add({{"job_id", job}, {"unit", "nats"}}).Set(loss_nats);
  if (bits_per_byte >= 0) validation_.Add({{"job_id", job}, {"unit", "bits_per_byte"}}).Set(bits_per_byte);
}

void PrometheusMetrics::Optimizer(const std::string& job, double grad_norm, double learning_rate) {
  if (grad_norm >= 0) grad_norm_.Add({{"job_id", job}}).Set(grad_norm);
  learning_rate_.Add({{"job_id", job}}).Set(learning_rate);
}

void PrometheusMetrics::Predicted(const std::string& job, double plan_step_s, double plan_bubble,
                                  double calibrated_step_s, double calibrated_bubble) {
  predicted_step_.Add({{"job_id", job}, {"source", "plan"}}).Set(plan_step_s);
  bubble_.Add({{"job_id", job}, {"source", "plan"}}).Set(plan_bubble);
  if (calibrated_step_s > 0) {
    predicted_step_.Add({{"job_id", job}, {"source", "calibrated"}}).Set(calibrated_step_s);
    (void)calibrated_bubble;  // the "predicted" bubble series carries it (Step)
  }
}

void PrometheusMetrics::Straggler(const std::string& job, const health::RankLabel& at, const std::string& op,
                                  double relative, double individual) {
  straggler_.Add(Labels(job, at, {{"op", op}, {"score", "relative"}})).Set(relative);
  straggler_.Add(Labels(job, at, {{"op", op}, {"score", "individual"}})).Set(individual);
}

void PrometheusMetrics::Memory(const std::string& job, const health::RankLabel& at, uint64_t peak, uint64_t budget,
                               uint64_t reserved) {
  peak_.Add(Labels(job, at, {})).Set(static_cast<double>(peak));
  budget_.Add(Labels(job, at, {})).Set(static_cast<double>(budget));
  reserved_.Add(Labels(job, at, {})).Set(static_cast<double>(reserved));
}

void PrometheusMetrics::Event(const std::string& job, const std::string& kind) {
  events_.Add({{"job_id", job}, {"kind", kind}}).Increment();
}

void PrometheusMetrics::Recovery(const std::string& job, const std::string& path, double seconds) {
  recoveries_.Add({{"job_id", job}, {"path", path}}).Increment();
  recovery_seconds_.Add({{"job_id", job}, {"path", path}}).Set(seconds);
}

void PrometheusMetrics::UpdateFleet(const std::vector<v1::Job>& jobs, const std::vector<v1::WorkerInfo>& workers) {
  for (int s = v1::PENDING; s <= v1::CANCELLED; ++s) {
    double n = 0;
    for (const v1::Job& j : jobs) n += j.state() == s;
    jobs_.Add({{"state", v1::JobState_Name(static_cast<v1::JobState>(s))}}).Set(n);
  }
  double busy = 0;
  for (const v1::WorkerInfo& w : workers) busy += !w.job_id().empty();
  workers_.Add({{"state", "busy"}}).Set(busy);
  workers_.Add({{"state", "idle"}}).Set(static_cast<double>(workers.size()) - busy);
}

std::string PrometheusMetrics::Serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace pipecoord::coordinator::http
