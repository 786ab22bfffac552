// JobMonitor: one job's online checks (bubble, straggler, hang, memory, probes) fed from its
// telemetry, heartbeats and the coordinator's ticks. Every call returns the events it raised;
// the coordinator stores and streams them.
// Thread-safe: every call takes the monitor's own lock, so the coordinator runs a round's
// per-batch checks (OnBatch, the bulk of the work at thousands of ranks) outside its core lock.
// The hang check has a lock of its own: OnTick and OnProgress, which the coordinator calls under
// its core lock, never wait for a round's checks (OnTick judges with the step time predicted as
// of the last batch or step checked). The calls of one rank's batches must come in the rank's
// order, OnBatch before the OnStepMeasured/OnStepDone of the step it completes (the
// coordinator's one-round-at-a-time ingest keeps both). calibration() and rebalance() are read
// by the thread that calls OnStepMeasured, their only writer.
#ifndef PIPECOORD_COORDINATOR_HEALTH_JOB_MONITOR_H_
#define PIPECOORD_COORDINATOR_HEALTH_JOB_MONITOR_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/health/bubble_check.h"
#include "coordinator/health/hang_check.h"
#include "coordinator/health/memory_check.h"
#include "coordinator/health/metrics_aggregate.h"
#include "coordinator/health/metrics_sink.h"
#include "jobplan/calibration.h"
#include "jobplan/plan_expectations.h"
#include "coordinator/health/probe_check.h"
#include "jobplan/health_settings.h"
#include "coordinator/health/straggler_check.h"
#include "proto/job.pb.h"
#include "proto/telemetry.pb.h"

namespace pipecoord::coordinator::health {

// What the dashboard shows of a job's health.
struct HealthSnapshot {
  bool enabled = false;
  double seconds_per_cost = 0;   // the plan's cost unit in seconds (0: not calibrated yet)
  double predicted_step_s = 0;   // calibrated once the job is (calibrated true)
  bool calibrated = false;
  double hang_deadline_s = 0;
  double predicted_makespan = 0;  // cost units
  std::vector<v1::ActionTiming> recent;  // the last kTimelineSteps steps, every rank
  std::vector<int> recent_rank;          // global rank of each entry of `recent`
  std::vector<StragglerScore> scores;
  std::vector<uint64_t> peak_bytes, budget_bytes;  // per global rank: last step's peak, budget
  int64_t probes_checked = 0;
  int64_t replays_checked = 0;  // PROBEs that replayed an F (the replay probe)
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
  // A step every rank has reported, with each global rank's actions (list order; only the first
  // replica's when only it sent the step whole; none when the step came folded), before it is
  // stored: fills the record's predictions (the plan's until the job is calibrated, then the
  // calibrated ones) and, once calibrated, its idle split (jobplan/idle_breakdown.h). The steps
  // after settings.warmup_steps that match the plan's lists are collected; the
  // calibration_steps-th calibrates the job: from then on the bubble and hang checks use the
  // calibrated expectations. Returns true when this step calibrated the job. Once calibrated the
  // bubble check runs here, over every rank's step at once, so that each BUBBLE event also names
  // the root of its wait chain from the step's idle split (a rank waiting on a neighbour that
  // itself waited names that neighbour as the peer, and the rank or link at the chain's end as the
  // root); the events come out of the OnStepDone that follows.
  bool OnStepMeasured(v1::StepRecord* record, const jobplan::StepActions& actions);
  // Set once calibrated; the rebalance proposal only when it predicts a gain.
  const std::optional<v1::Calibration>& calibration() const { return calibration_proto_; }
  const std::optional<v1::RebalanceProposal>& rebalance() const { return rebalance_; }
  // True once after the proposal changed (made, replaced or withdrawn) since the last call.
  bool TakeRebalanceChanged();
  // A step every rank has reported.
  std::vector<v1::HealthEvent> OnStepDone(const v1::StepRecord& record);
  void OnProgress(int global_rank, const v1::Progress& progress, int64_t now_ns);
  std::vector<v1::HealthEvent> OnTick(int64_t now_ns);
  HealthSnapshot Snapshot() const;

 private:
  double PredictedStepSeconds() const;  // calibrated once calibrated, else plan x Scale()
  double PlanStepSeconds() const;
  double Scale() const;  // scale_, or computed while no step has completed yet
  // A stage's work factor (stage_work_; 1 where unknown).
  double Work(int stage) const {
    return stage >= 0 && stage < static_cast<int>(stage_work_.size()) ? stage_work_[stage] : 1.0;
  }

  mutable std::mutex mu_;       // every public call's but OnTick's and OnProgress's; guards the rest
  mutable std::mutex hang_mu_;  // hang_'s (taken after mu_ where both are)
  std::atomic<double> predicted_step_s_{0};  // PredictedStepSeconds() as of the last call that changed it
  std::string job_id_;
  jobplan::HealthSettings settings_;
  RankLayout layout_;
  int world_;
  int steps_;
  MetricsSink* sink_;
  PipelineRankAggregate gauges_;  // the per-rank gauges on their way to sink_
  std::optional<jobplan::PlanExpectations> plan_;
  std::vector<uint64_t> budgets_;
  std::unique_ptr<BubbleCheck> bubble_;
  std::unique_ptr<StragglerCheck> straggler_;
  std::unique_ptr<HangCheck> hang_;
  std::unique_ptr<MemoryCheck> memory_;
  std::unique_ptr<ProbeCheck> probe_;
  std::map<int, std::vector<std::pair<int, v1::ActionTiming>>> recent_;  // step -> (global rank, timing)
  std::vector<uint64_t> last_peak_;
  double scale_ = 0;  // seconds per cost unit, refreshed once per completed step
  v1::JobSpec spec_;
  v1::JobSpec replica_spec_;  // spec_ at dp 1: one replica's pipeline (steps only replica 0 sent whole)
  RankLayout replica_layout_;
  v1::JobSpec calibration_spec_;  // the one calibrated_ was measured as (spec_ or replica_spec_)
  v1::Plan plan_proto_;
  std::vector<double> stage_work_;  // per virtual stage: the head's extra work (stage_work.h)
  // Per pipeline rank, (stage, op) -> the kind's mean predicted work (cost units): the straggler
  // check's divisor for folded actions (ActionTotals).
  std::vector<std::map<std::pair<int, int>, double>> kind_cost_;
  int steps_measured_ = 0;  // this attempt's
  std::vector<jobplan::StepActions> calibration_steps_;
  std::optional<jobplan::CalibratedJob> calibrated_;
  // Calibration windows measured after the first (OnStepMeasured: a faster steady state).
  static constexpr int kRefreshWindows = 3;
  static constexpr int kRefreshSteps = 10;  // a refresh's window: at least this many steps
  static constexpr double kRefreshGain = 0.05;
  int refresh_windows_ = 0;
  // The last kNoiseSteps matching steps' times after the warm-up: the noise a proposal must beat.
  static constexpr size_t kNoiseSteps = 20;
  std::vector<double> recent_times_;
  bool rebalance_changed_ = false;
  double StepNoise() const;
  void Propose();
  std::optional<v1::Calibration> calibration_proto_;
  std::optional<v1::RebalanceProposal> rebalance_;
  std::vector<v1::HealthEvent> bubble_events_;  // from OnStepMeasured, for the next OnStepDone
};

// ReplayJobMetrics: a job's MetricsSink series rebuilt from what the state file keeps, so that
// after a coordinator restart /metrics shows each kept job as the previous process left it
// (finished jobs keep their last values until --max-jobs drops them) and the counters of a
// resumed job continue from there instead of from 0.
//
// The sink gets the calls the live coordinator made, in the order it made them:
//   Event      for every stored event (lifecycle and health);
//   Step       for every stored step record, in the order measured: a step run again after a
//              restart counts again, as it did live (steps_total counts steps measured);
//   Action, Memory   for every stored telemetry batch, through a JobMonitor as at ingest;
//   Straggler  after each step every rank reported, from that monitor; a new monitor per
//              attempt (a new session, or a rank's steps starting over), as the coordinator
//              makes one per attempt.
// The health checks' own events are not raised again (they are stored already).
// Exact while the state file holds the job's whole telemetry (the trace window, 200k actions a
// job by default); beyond it the action histograms and straggler scores come from the window.
//
// `job` as stored: spec (defaults applied), plan, and steps in the order they were measured
// (every record, those a restart replaced included). `events`: serialized HealthEvents, in the
// order stored; `telemetry`: the stored batches in arrival order. `sink` may be null (nothing to
// do). An event that does not parse is skipped.
void ReplayJobMetrics(const v1::Job& job, const std::vector<std::string>& events,
                      const std::vector<const v1::TelemetryBatch*>& telemetry, MetricsSink* sink);

}  // namespace pipecoord::coordinator::health

#endif  // PIPECOORD_COORDINATOR_HEALTH_JOB_MONITOR_H_
