// JobMonitor: one job's online checks (bubble, straggler, hang, memory, probes) fed from its
// telemetry, heartbeats and the coordinator's ticks. Pure logic with no lock of its own: the
// Coordinator owns one per job and calls it under its lock. Every call returns the events it
// raised; the coordinator stores and streams them.
#ifndef PIPECOORD_COORDINATOR_HEALTH_JOB_MONITOR_H_
#define PIPECOORD_COORDINATOR_HEALTH_JOB_MONITOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "coordinator/health/bubble_check.h"
#include "coordinator/health/hang_check.h"
#include "coordinator/health/memory_check.h"
#include "coordinator/health/metrics_sink.h"
#include "coordinator/health/plan_expectations.h"
#include "coordinator/health/probe_check.h"
#include "coordinator/health/settings.h"
#include "coordinator/health/straggler_check.h"
#include "proto/job.pb.h"
#include "proto/telemetry.pb.h"

namespace pipecoord::coordinator::health {

// What the dashboard shows of a job's health.
struct HealthSnapshot {
  bool enabled = false;
  double seconds_per_cost = 0;   // the plan's cost unit in seconds (0: not calibrated yet)
  double predicted_step_s = 0;
  double hang_deadline_s = 0;
  double predicted_makespan = 0;  // cost units
  std::vector<v1::ActionTiming> recent;  // the last kTimelineSteps steps, every rank
  std::vector<int> recent_rank;          // global rank of each entry of `recent`
  std::vector<StragglerScore> scores;
  std::vector<uint64_t> peak_bytes, budget_bytes;  // per global rank: last step's peak, budget
  int64_t probes_checked = 0;
};

class JobMonitor {
 public:
  static constexpr int kTimelineSteps = 3;

  // `job` holds the spec (defaults applied) and the plan. `sink` may be null; not owned.
  JobMonitor(const v1::Job& job, MetricsSink* sink);

  // The job was dispatched: the hang check's clock starts.
  void Start(int64_t now_ns);
  void SetDeviceMemory(int global_rank, uint64_t bytes);
  // One rank's telemetry batch (validated by the coordinator).
  std::vector<v1::HealthEvent> OnBatch(int global_rank, const v1::TelemetryBatch& batch, int64_t now_ns);
  // A step every rank has reported.
  std::vector<v1::HealthEvent> OnStepDone(const v1::StepRecord& record);
  void OnProgress(int global_rank, const v1::Progress& progress, int64_t now_ns);
  std::vector<v1::HealthEvent> OnTick(int64_t now_ns);
  HealthSnapshot Snapshot() const;

 private:
  double PredictedStepSeconds() const;
  double Scale() const;  // scale_, or computed while no step has completed yet

  std::string job_id_;
  Settings settings_;
  int pp_, world_;
  int steps_;
  MetricsSink* sink_;
  std::optional<PlanExpectations> plan_;
  std::vector<uint64_t> budgets_;
  std::unique_ptr<BubbleCheck> bubble_;
  std::unique_ptr<StragglerCheck> straggler_;
  std::unique_ptr<HangCheck> hang_;
  std::unique_ptr<MemoryCheck> memory_;
  std::unique_ptr<ProbeCheck> probe_;
  std::map<int, std::vector<std::pair<int, v1::ActionTiming>>> recent_;  // step -> (global rank, timing)
  std::vector<uint64_t> last_peak_;
  double scale_ = 0;  // seconds per cost unit, refreshed once per completed step
};

}  // namespace pipecoord::coordinator::health

#endif  // PIPECOORD_COORDINATOR_HEALTH_JOB_MONITOR_H_
