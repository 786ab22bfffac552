#include "coordinator/health/job_monitor.h"

#include <algorithm>
#include <cstdio>

#include "common/median.h"
#include "coordinator/health/event_text.h"
#include "jobplan/idle_breakdown.h"
#include "jobplan/layout.h"
#include "jobplan/probe_placement.h"
#include "jobplan/rebalance.h"
#include "jobplan/stage_work.h"
#include "proto/op_kinds.h"

namespace pipecoord::coordinator::health {

JobMonitor::JobMonitor(const v1::Job& job, MetricsSink* sink)
    : job_id_(job.id()), settings_(jobplan::ResolveHealth(job.spec().health())), layout_(jobplan::LayoutOf(job.spec())),
      world_(layout_.world()), steps_(job.spec().steps()), sink_(sink), gauges_(layout_, job.id(), sink),
      last_peak_(world_, 0), spec_(job.spec()), replica_spec_(job.spec()),
      replica_layout_(RankLayout::OfDegrees(layout_.pp(), 1, layout_.tp())), plan_proto_(job.plan()) {
  replica_spec_.set_dp(1);
  budgets_.assign(job.plan().memory_budget_bytes().begin(), job.plan().memory_budget_bytes().end());
  auto expect = jobplan::ExpectPlan(job.spec(), job.plan());
  if (expect.ok()) plan_ = std::move(expect).value();
  if (!settings_.enabled) return;
  if (plan_) bubble_ = std::make_unique<BubbleCheck>(settings_, *plan_, layout_);
  straggler_ = std::make_unique<StragglerCheck>(settings_, layout_);
  stage_work_ = jobplan::StageWorkFactors(job.spec(), job.plan());
  if (plan_) {
    kind_cost_.resize(plan_->ranks.size());
    for (size_t r = 0; r < plan_->ranks.size(); ++r) {
      std::map<std::pair<int, int>, std::pair<double, int>> sums;
      for (const jobplan::ComputeSlot& slot : plan_->ranks[r]) {
        if (!(slot.end > slot.start)) continue;
        auto& [sum, n] = sums[{slot.action.stage(), static_cast<int>(slot.action.op())}];
        sum += (slot.end - slot.start) * Work(slot.action.stage());
        ++n;
      }
      for (const auto& [kind, sn] : sums) kind_cost_[r][kind] = sn.first / sn.second;
    }
  }
  memory_ = std::make_unique<MemoryCheck>(settings_, budgets_, layout_);
  std::vector<kernels::cpu::ProbeShape> shapes;
  for (int r = 0; r < layout_.pp(); ++r) {
    const jobplan::ProbeGemm g = jobplan::ProbeGemmFor(job.spec(), jobplan::HoldsHead(job.plan(), r));
    shapes.push_back({g.m, g.k, g.n});
  }
  probe_ = std::make_unique<ProbeCheck>(job.spec().model().seed(), std::move(shapes), layout_);
  predicted_step_s_.store(PredictedStepSeconds(), std::memory_order_relaxed);
}

void JobMonitor::Start(int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  std::lock_guard<std::mutex> hang(hang_mu_);
  if (settings_.enabled) hang_ = std::make_unique<HangCheck>(settings_, layout_, steps_, now_ns);
  predicted_step_s_.store(PredictedStepSeconds(), std::memory_order_relaxed);
}

void JobMonitor::SetDeviceMemory(int g, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (memory_) memory_->SetDeviceMemory(g, bytes);
}

double JobMonitor::Scale() const {
  if (scale_ > 0 || !straggler_) return scale_;
  return straggler_->FastestMedian();
}

double JobMonitor::PlanStepSeconds() const {
  if (!plan_) return 0;
  return plan_->makespan * Scale();
}

double JobMonitor::PredictedStepSeconds() const {
  return calibrated_ ? calibrated_->calibrated.makespan : PlanStepSeconds();
}

double JobMonitor::StepNoise() const {
  // The spread of the recent steps' times, the interquartile range over the median: robust to the
  // few slow steps (the warm-up, a hiccup) that made (max - min) / median of three steps 83 % on a
  // job whose steady steps varied 7 %, and so withheld a proposal that ran 27 % faster.
  if (recent_times_.size() < 2) return 0;
  std::vector<double> t = recent_times_;
  std::sort(t.begin(), t.end());
  const auto at = [&](double q) { return t[static_cast<size_t>(q * (t.size() - 1) + 0.5)]; };
  const double median = Median(t);
  return median > 0 ? (at(0.75) - at(0.25)) / median : 0;
}

void JobMonitor::Propose() {
  // A proposal must gain more than the step time varies (StepNoise), 2 % at least: a smaller
  // predicted gain cannot be told from noise, and proposing it sends users round in circles.
  const double noise = StepNoise();
  std::optional<v1::RebalanceProposal> next;
  auto proposal = jobplan::ProposeRebalance(calibration_spec_, plan_proto_, *calibrated_, std::max(0.02, noise));
  if (proposal.ok() && proposal->has_value()) {
    next = **proposal;
    char beats[120];
    std::snprintf(beats, sizeof beats, "; gain %.1f %% > the step-time noise %.1f %% (interquartile range of the last %zu steps)",
                  100 * next->gain(), 100 * noise, recent_times_.size());
    next->set_reason(next->reason() + beats);
  }
  const bool same = next.has_value() == rebalance_.has_value() &&
                    (!next || next->SerializeAsString() == rebalance_->SerializeAsString());
  if (!same) {
    rebalance_ = std::move(next);
    rebalance_changed_ = true;
  }
}

bool JobMonitor::TakeRebalanceChanged() {
  std::lock_guard<std::mutex> lock(mu_);
  const bool changed = rebalance_changed_;
  rebalance_changed_ = false;
  return changed;
}

bool JobMonitor::OnStepMeasured(v1::StepRecord* rec, const jobplan::StepActions& actions) {
  std::lock_guard<std::mutex> lock(mu_);
  // Only the first replica's actions: checked as the job of that one replica (replicas run alike).
  const bool one_replica = actions.size() < static_cast<size_t>(world_) &&
                           actions.size() == static_cast<size_t>(replica_layout_.world());
  const v1::JobSpec& spec = one_replica ? replica_spec_ : spec_;
  const RankLayout& layout = one_replica ? replica_layout_ : layout_;
  const bool matches = jobplan::MatchesPlan(spec, plan_proto_, actions);
  bool calibrated_now = false;
  // The first calibration after the warm-up steps; then, for kRefreshWindows more windows of
  // kRefreshSteps steps, a fresh one replaces it when it predicts a step at least kRefreshGain faster: a
  // job's first steps run slower than its steady state (OpenBLAS threads, allocator pools, page
  // faults: the demo's first five steps took up to twice its later ones), and a calibration on
  // them over-predicts every later step. Never a slower one: a fault that slows the job down must
  // stay visible against the calibration, not be absorbed into it.
  const bool collecting = !calibrated_ || refresh_windows_ < kRefreshWindows;
  if (matches && steps_measured_ + 1 > settings_.warmup_steps) {
    recent_times_.push_back(rec->step_time_s());
    if (recent_times_.size() > kNoiseSteps) recent_times_.erase(recent_times_.begin());
  }
  if (collecting && matches && ++steps_measured_ > settings_.warmup_steps) {
    calibration_steps_.push_back(actions);
    // A refresh measures a longer window: one lucky fast window among several short ones would
    // under-predict every step after it.
    const int window = calibrated_ ? std::max(settings_.calibration_steps, kRefreshSteps) : settings_.calibration_steps;
    if (static_cast<int>(calibration_steps_.size()) >= window) {
      const bool refresh = calibrated_.has_value();
      if (refresh) ++refresh_windows_;
      auto costs = jobplan::MeasureCosts(spec, plan_proto_, calibration_steps_);
      auto job = costs.ok() ? jobplan::Calibrate(spec, plan_proto_, *costs) : Result<jobplan::CalibratedJob>(costs.status());
      calibration_steps_.clear();
      const bool adopt = job.ok() && (!refresh || job->calibrated.makespan <
                                                      (1 - kRefreshGain) * calibrated_->calibrated.makespan);
      if (adopt) {
        const int refreshes = calibration_proto_ ? calibration_proto_->refreshes() + (refresh ? 1 : 0) : 0;
        calibration_proto_ = jobplan::ToProto(*job, PlanStepSeconds());
        calibration_proto_->set_last_step(rec->step());
        calibration_proto_->set_refreshes(refreshes);
        calibrated_ = std::move(job).value();
        calibration_spec_ = spec;
        // The checks now compare with the calibrated timeline, in seconds (scale 1).
        if (bubble_) bubble_ = std::make_unique<BubbleCheck>(settings_, calibrated_->expect, layout_);
        calibrated_now = true;
      }
      if (calibrated_) Propose();  // at every window: the noise it must beat is measured again
    }
  }
  rec->set_predicted_step_s(PredictedStepSeconds());
  rec->set_predicted_bubble_rate(calibrated_ ? calibrated_->calibrated.bubble_rate : plan_proto_.predicted_bubble_rate());
  if (sink_) {
    // The plan's step time as it stood when the job was calibrated (Calibration.plan_step_s).
    const double plan_s = calibration_proto_ ? calibration_proto_->plan_step_s() : PlanStepSeconds();
    sink_->Predicted(job_id_, plan_s, plan_proto_.predicted_bubble_rate(),
                     calibrated_ ? calibrated_->calibrated.makespan : 0,
                     calibrated_ ? calibrated_->calibrated.bubble_rate : 0);
  }
  if (calibrated_ && matches) {
    // A cause is named for at least 2 % of the calibrated step (0.1 ms at least): below, noise.
    const double min_variation = std::max(1e-4, 0.02 * calibrated_->calibrated.makespan);
    jobplan::IdleBreakdown split = jobplan::SplitIdle(*calibrated_, layout, actions, rec->step_time_s(), min_variation);
    for (v1::RankIdle& r : split.ranks) {
      const v1::IdleSplit& s = r.split();
      gauges_.AddIdle(RankLabel{r.rank(), r.dp_rank(), layout_.tp() > 1 ? r.tp_rank() : -1}, s.inherent_s(),
                      s.imbalance_s(), s.variation_s(), s.comm_s());
      *rec->add_idle() = std::move(r);
    }
    gauges_.FlushIdle();
    *rec->mutable_idle_total() = split.total;
    if (bubble_ && !calibrated_now) {  // the calibrated timeline, in seconds (bubble_check.h)
      for (int g = 0; g < world_ && g < static_cast<int>(actions.size()); ++g) {
        std::optional<v1::HealthEvent> e = bubble_->OnRankStep(g, rec->step(), actions[g], 1.0);
        if (!e) continue;
        const v1::IdleSplit& s = rec->idle(g).split();
        if (s.cause_rank() >= 0) {
          const std::string root = layout_.Name(layout_.AtPipelineRank(g, s.cause_rank()));
          e->set_message(e->message() + "; root of the wait chain: " +
                         (s.cause_is_link() ? "the link from " + root + " to " +
                                                  layout_.Name(layout_.AtPipelineRank(g, s.cause_link_to()))
                                            : root));
        }
        bubble_events_.push_back(std::move(*e));
      }
    }
  }
  predicted_step_s_.store(PredictedStepSeconds(), std::memory_order_relaxed);
  return calibrated_now;
}

std::vector<v1::HealthEvent> JobMonitor::OnBatch(int g, const v1::TelemetryBatch& b, int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::HealthEvent> events;
  const int rank = layout_.PipelineRank(g);
  const RankLabel action_label = ActionLabelOf(layout_, g);
  // The timeline shows whole steps: a folded step's PROBEs alone would draw a step that is not there.
  const bool in_timeline = InTimeline(layout_, g) && b.totals_size() == 0;
  // Timing per step of this batch (a batch normally carries one whole step).
  std::map<int, std::vector<const v1::ActionTiming*>> by_step;
  for (const v1::ActionTiming& t : b.actions()) {
    const double seconds = (t.end_ns() - t.start_ns()) * 1e-9;
    if (sink_) sink_->Action(job_id_, action_label, t.action().stage(), v1::Op_Name(t.action().op()), seconds);
    by_step[t.step()].push_back(&t);
    if (in_timeline) recent_[t.step()].emplace_back(g, t);
  }
  while (static_cast<int>(recent_.size()) > kTimelineSteps + 1) recent_.erase(recent_.begin());
  for (auto& [step, actions] : by_step) {
    if (straggler_ && plan_ && rank < static_cast<int>(plan_->ranks.size())) {
      const std::vector<jobplan::ComputeSlot>& slots = plan_->ranks[rank];
      size_t k = 0;
      for (const v1::ActionTiming* timing : actions) {
        const v1::ActionTiming& t = *timing;
        if (!v1::IsCompute(t.action().op())) continue;
        if (k < slots.size() && slots[k].end > slots[k].start) {
          // The plan prices the head at nothing; the straggler check compares work (stage_work.h).
          const double cost = (slots[k].end - slots[k].start) * Work(t.action().stage());
          straggler_->Add(g, step, t.action().op(), (t.end_ns() - t.start_ns()) * 1e-9 / cost, cost);
        }
        ++k;
      }
    }
    if (probe_) {
      for (const v1::ActionTiming* timing : actions) {
        const v1::ActionTiming& t = *timing;
        if (t.action().op() != v1::PROBE) continue;
        if (auto e = probe_->OnProbe(g, step, t.probe_checksum())) events.push_back(*e);
        if (t.has_replay()) {
          for (v1::HealthEvent& e : probe_->OnReplay(g, step, t.replay())) events.push_back(std::move(e));
        }
      }
    }
  }
  // Folded actions: the kind's fastest, as the check takes each window's fastest action.
  if (straggler_ && rank < static_cast<int>(kind_cost_.size())) {
    for (const v1::ActionTotals& k : b.totals()) {
      if (!v1::IsCompute(k.op())) continue;
      const auto it = kind_cost_[rank].find({k.stage(), static_cast<int>(k.op())});
      if (it == kind_cost_[rank].end()) continue;
      straggler_->Add(g, k.step(), k.op(), k.fastest_ns() * 1e-9 / it->second, it->second);
    }
  }
  for (const v1::StepSummary& s : b.steps()) {
    last_peak_[g] = s.memory_peak_bytes();
    gauges_.Memory(g, s.step(), s.memory_peak_bytes(), rank < static_cast<int>(budgets_.size()) ? budgets_[rank] : 0,
                   s.memory_reserved_bytes());
    if (memory_) {
      if (auto e = memory_->OnStep(g, s.step(), s.memory_peak_bytes())) events.push_back(*e);
    }
    std::lock_guard<std::mutex> hang(hang_mu_);
    if (hang_) hang_->OnStepReported(g, s.step(), now_ns);
  }
  predicted_step_s_.store(PredictedStepSeconds(), std::memory_order_relaxed);
  return events;
}

std::vector<v1::HealthEvent> JobMonitor::OnStepDone(const v1::StepRecord& rec) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::HealthEvent> events = std::move(bubble_events_);
  bubble_events_.clear();
  if (straggler_) {
    for (v1::HealthEvent& e : straggler_->Evaluate(rec.step())) events.push_back(std::move(e));
    scale_ = straggler_->FastestMedian();
    for (const StragglerScore& s : straggler_->scores()) {
      gauges_.AddStraggler(s.global_rank, v1::Op_Name(s.op), s.relative, s.individual);
    }
    gauges_.FlushStraggler();
  }
  predicted_step_s_.store(PredictedStepSeconds(), std::memory_order_relaxed);
  return events;
}

void JobMonitor::OnProgress(int g, const v1::Progress& p, int64_t now_ns) {
  std::lock_guard<std::mutex> hang(hang_mu_);
  if (hang_) hang_->OnProgress(g, p, now_ns);
}

std::vector<v1::HealthEvent> JobMonitor::OnTick(int64_t now_ns) {
  std::lock_guard<std::mutex> hang(hang_mu_);
  std::vector<v1::HealthEvent> events;
  if (hang_) {
    if (auto e = hang_->OnTick(now_ns, predicted_step_s_.load(std::memory_order_relaxed))) events.push_back(*e);
  }
  return events;
}

HealthSnapshot JobMonitor::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  HealthSnapshot s;
  s.enabled = settings_.enabled;
  s.seconds_per_cost = Scale();
  s.predicted_step_s = PredictedStepSeconds();
  s.calibrated = calibrated_.has_value();
  {
    std::lock_guard<std::mutex> hang(hang_mu_);
    s.hang_deadline_s = hang_ ? hang_->Deadline(s.predicted_step_s) : 0;
  }
  s.predicted_makespan = plan_ ? plan_->makespan : 0;
  // The newest kTimelineSteps steps that have started.
  int kept = 0;
  for (auto it = recent_.rbegin(); it != recent_.rend() && kept < kTimelineSteps; ++it, ++kept) {
    for (const auto& [g, t] : it->second) {
      s.recent.push_back(t);
      s.recent_rank.push_back(g);
    }
  }
  if (straggler_) s.scores = straggler_->scores();
  s.peak_bytes = last_peak_;
  for (int g = 0; g < world_; ++g) {
    const int r = layout_.PipelineRank(g);
    s.budget_bytes.push_back(r < static_cast<int>(budgets_.size()) ? budgets_[r] : 0);
  }
  s.probes_checked = probe_ ? probe_->probes_checked() : 0;
  s.replays_checked = probe_ ? probe_->replays_checked() : 0;
  return s;
}

}  // namespace pipecoord::coordinator::health
