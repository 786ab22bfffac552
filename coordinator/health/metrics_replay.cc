// ReplayJobMetrics (job_monitor.h): a job's /metrics series rebuilt from its stored state.
#include <algorithm>
#include <map>
#include <memory>

#include "coordinator/health/job_monitor.h"
#include "coordinator/health/metrics_aggregate.h"
#include "jobplan/data_spec.h"
#include "jobplan/layout.h"

namespace pipecoord::coordinator::health {
namespace {

// The first step a batch reports (its actions' or its summaries'); -1 for an empty batch.
int FirstStep(const v1::TelemetryBatch& b) {
  if (b.actions_size() > 0) return b.actions(0).step();
  if (b.steps_size() > 0) return b.steps(0).step();
  return -1;
}

}  // namespace

void ReplayJobMetrics(const v1::Job& job, const std::vector<std::string>& events,
                      const std::vector<const v1::TelemetryBatch*>& telemetry, MetricsSink* sink) {
  if (sink == nullptr) return;
  const std::string& id = job.id();
  PipelineRankAggregate gauges(jobplan::LayoutOf(job.spec()), id, sink);
  for (const std::string& bytes : events) {
    v1::HealthEvent e;
    if (e.ParseFromString(bytes)) sink->Event(id, v1::EventKind_Name(e.kind()));
  }
  for (const v1::StepRecord& rec : job.steps()) {
    // Records from before calibration existed carry no prediction: the plan's, as shown then.
    const double predicted = rec.predicted_step_s() > 0 ? rec.predicted_bubble_rate() : job.plan().predicted_bubble_rate();
    sink->Step(id, rec.step_time_s(), rec.measured_bubble_rate(), predicted);
    sink->Optimizer(id, rec.has_grad_norm() ? rec.grad_norm() : -1, rec.learning_rate());
    if (rec.has_val_loss()) {
      sink->Validation(id, rec.val_loss(),
                       jobplan::ByteLevel(job.spec()) ? jobplan::BitsPerByte(rec.val_loss()) : -1);
    }
    for (const v1::RankIdle& r : rec.idle()) {
      const v1::IdleSplit& s = r.split();
      gauges.AddIdle(RankLabel{r.rank(), r.dp_rank(), job.spec().tp() > 1 ? r.tp_rank() : -1}, s.inherent_s(),
                     s.imbalance_s(), s.variation_s(), s.comm_s());
    }
    gauges.FlushIdle();
  }
  if (job.has_calibration()) {
    const v1::Calibration& c = job.calibration();
    sink->Predicted(id, c.plan_step_s(), job.plan().predicted_bubble_rate(), c.predicted_step_s(), c.predicted_bubble_rate());
  } else if (job.steps_size() > 0) {
    sink->Predicted(id, job.steps(job.steps_size() - 1).predicted_step_s(), job.plan().predicted_bubble_rate(), 0, 0);
  }
  // The telemetry, attempt by attempt, through a monitor of each attempt's own.
  const RankLayout layout = jobplan::LayoutOf(job.spec());
  const int world = layout.world();
  std::unique_ptr<JobMonitor> monitor;
  uint64_t session = 0;
  std::vector<int> last_summarized;
  std::map<int, int> reports;  // step -> ranks that summarized it in this attempt
  for (const v1::TelemetryBatch* b : telemetry) {
    const RankCoords c{b->rank(), b->dp_rank(), b->tp_rank()};
    if (!layout.Valid(c)) continue;
    const int g = layout.Global(c);
    const int first = FirstStep(*b);
    const bool new_session = b->session() != 0 && b->session() != session;
    const bool starts_over = monitor != nullptr && first >= 0 && first <= last_summarized[g];
    if (monitor == nullptr || new_session || starts_over) {
      monitor = std::make_unique<JobMonitor>(job, sink);
      if (b->session() != 0) session = b->session();
      last_summarized.assign(world, -1);
      reports.clear();
    }
    (void)monitor->OnBatch(g, *b, 0);  // its events were stored when it arrived
    for (const v1::StepSummary& s : b->steps()) {
      last_summarized[g] = s.step();
      if (++reports[s.step()] < world) continue;
      reports.erase(s.step());
      v1::StepRecord rec;
      rec.set_step(s.step());
      (void)monitor->OnStepDone(rec);
    }
  }
}

}  // namespace pipecoord::coordinator::health
