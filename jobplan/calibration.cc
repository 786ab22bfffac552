#include "jobplan/calibration.h"

#include <algorithm>
#include <map>

#include "common/median.h"
#include "jobplan/layout.h"
#include "jobplan/plan_convert.h"
#include "proto/op_kinds.h"

namespace pipecoord::jobplan {

namespace sch = pipecoord::schedules;

namespace {

double Seconds(const v1::ActionTiming& t) { return (t.end_ns() - t.start_ns()) * 1e-9; }

bool SameAction(const v1::Action& a, const v1::Action& b) {
  return a.op() == b.op() && a.stage() == b.stage() && a.microbatch() == b.microbatch();
}

// Sums and counts of one step, per stage and op.
struct StageSums {
  std::vector<double> sum[4];
  std::vector<int> count[4];
  explicit StageSums(int stages) {
    for (int k = 0; k < 4; ++k) {
      sum[k].assign(stages, 0);
      count[k].assign(stages, 0);
    }
  }
};

int OpSlot(v1::Op op) { return op == v1::F ? 0 : op == v1::B ? 1 : op == v1::W ? 2 : 3; }

double MeanOr0(const std::vector<double>& v) {
  double s = 0;
  int n = 0;
  for (double x : v) {
    if (x > 0) {
      s += x;
      ++n;
    }
  }
  return n ? s / n : 0;
}

}  // namespace

bool MatchesPlan(const v1::JobSpec& spec, const v1::Plan& plan, const StepActions& step) {
  if (spec.pp() < 1) return false;
  const RankLayout layout = LayoutOf(spec);
  if (step.size() != static_cast<size_t>(layout.world())) return false;
  for (size_t g = 0; g < step.size(); ++g) {
    const v1::RankJobs& list = plan.ranks(layout.PipelineRank(static_cast<int>(g)));
    if (static_cast<int>(step[g].size()) != list.actions_size()) return false;
    for (int i = 0; i < list.actions_size(); ++i) {
      if (!SameAction(step[g][i].action(), list.actions(i))) return false;
    }
  }
  return true;
}

Result<MeasuredCosts> MeasureCosts(const v1::JobSpec& spec, const v1::Plan& plan, const std::vector<StepActions>& steps) {
  if (steps.empty()) return InvalidArgument("calibration: no measured step to learn from");
  const RankLayout layout = LayoutOf(spec);
  const int pp = layout.pp(), world = layout.world();
  const int stages = plan.stage_to_rank_size(), mbs = spec.microbatches();
  // Per stage and op, then per rank and position, each step's mean; medians at the end.
  std::vector<std::vector<double>> stage_means[4];
  for (auto& v : stage_means) v.assign(stages, {});
  std::vector<std::vector<std::vector<double>>> other(pp);
  for (int r = 0; r < pp; ++r) other[r].resize(plan.ranks(r).actions_size());
  std::vector<double> comm_means;
  for (size_t n = 0; n < steps.size(); ++n) {
    const StepActions& step = steps[n];
    if (!MatchesPlan(spec, plan, step)) {
      return InvalidArgument("calibration: step " + std::to_string(n) + " does not match the plan's job lists");
    }
    StageSums sums(stages);
    std::vector<std::vector<double>> other_sum(pp);
    for (int r = 0; r < pp; ++r) other_sum[r].assign(plan.ranks(r).actions_size(), 0);
    // Where each pipeline's (replica's and shard's) inputs were produced: F outputs and input
    // gradients (B or BW), ns. A pipeline is named by its rank 0's global rank.
    std::vector<int64_t> f_end(static_cast<size_t>(world) * stages * mbs, -1), g_end(f_end.size(), -1);
    auto at = [&](int g, int stage, int mb) {
      return (static_cast<size_t>(layout.AtPipelineRank(g, 0)) * stages + stage) * mbs + mb;
    };
    for (int g = 0; g < world; ++g) {
      for (size_t i = 0; i < step[g].size(); ++i) {
        const v1::ActionTiming& t = step[g][i];
        const v1::Action& a = t.action();
        if (!v1::IsCompute(a.op())) {
          other_sum[layout.PipelineRank(g)][i] += Seconds(t);
          continue;
        }
        if (a.stage() < 0 || a.stage() >= stages || a.microbatch() < 0 || a.microbatch() >= mbs) {
          return InvalidArgument("calibration: an action's stage or micro-batch is outside the plan");
        }
        const int k = OpSlot(a.op());
        sums.sum[k][a.stage()] += Seconds(t);
        ++sums.count[k][a.stage()];
        if (a.op() == v1::F) f_end[at(g, a.stage(), a.microbatch())] = t.end_ns();
        if (a.op() == v1::B || a.op() == v1::BW) g_end[at(g, a.stage(), a.microbatch())] = t.end_ns();
      }
    }
    for (int k = 0; k < 4; ++k) {
      for (int s = 0; s < stages; ++s) {
        if (sums.count[k][s] > 0) stage_means[k][s].push_back(sums.sum[k][s] / sums.count[k][s]);
      }
    }
    const double replicas = world / pp;  // pipelines: replicas x shards
    for (int r = 0; r < pp; ++r) {
      for (size_t i = 0; i < other_sum[r].size(); ++i) other[r][i].push_back(other_sum[r][i] / replicas);
    }
    // Transfers: a compute action that waited for a peer, from its producer's end to its start.
    // The two ends are on two workers' clocks, each offset by its own estimate's error (clock_sync.h),
    // which adds to one direction of a link what it takes from the other: so each direction's
    // samples are averaged apart and a link's time is the mean of its two directions where both
    // waited (an uneven pipeline waits mostly one way, and a plain mean over its samples took the
    // offset for transfer time: 0.9 ms where the balanced job measured 0.2 ms).
    std::map<std::pair<int, int>, std::pair<double, int>> by_direction;  // (from, to) pipeline ranks -> sum, n
    for (int g = 0; g < world; ++g) {
      for (const v1::ActionTiming& t : step[g]) {
        const v1::Action& a = t.action();
        if (!v1::IsCompute(a.op()) || t.wait_peer() < 0 || t.wait_ns() <= 0) continue;
        int64_t produced = -1;
        if (a.op() == v1::F && a.stage() > 0) produced = f_end[at(g, a.stage() - 1, a.microbatch())];
        if ((a.op() == v1::B || a.op() == v1::BW) && a.stage() + 1 < stages) {
          produced = g_end[at(g, a.stage() + 1, a.microbatch())];
        }
        // Only a wait that began before its input was produced times the transfer: one that began
        // later (the consumer was still busy, e.g. with the step before) found the input in
        // flight or already there, and start - produced would count the consumer's own work.
        if (produced < 0 || t.start_ns() - t.wait_ns() > produced) continue;
        auto& [sum, n_samples] = by_direction[{t.wait_peer(), layout.PipelineRank(g)}];
        sum += std::max<int64_t>(0, t.start_ns() - produced) * 1e-9;
        ++n_samples;
      }
    }
    double link_sum = 0;
    int links = 0;
    for (const auto& [dir, v] : by_direction) {
      const auto [from, to] = dir;
      const double mean = v.first / v.second;
      auto back = by_direction.find({to, from});
      if (back == by_direction.end()) {
        link_sum += mean;  // one direction only: its mean, offset and all
        ++links;
      } else if (from < to) {  // each link once
        link_sum += (mean + back->second.first / back->second.second) / 2;
        ++links;
      }
    }
    if (links > 0) comm_means.push_back(link_sum / links);
  }
  MeasuredCosts c;
  c.steps = static_cast<int>(steps.size());
  std::vector<double>* out[4] = {&c.f, &c.b, &c.w, &c.bw};
  for (int k = 0; k < 4; ++k) {
    out[k]->assign(stages, 0);
    for (int s = 0; s < stages; ++s) (*out[k])[s] = Median(stage_means[k][s]);
  }
  c.other.resize(pp);
  for (int r = 0; r < pp; ++r) {
    for (const auto& samples : other[r]) c.other[r].push_back(Median(samples));
  }
  c.comm = Median(comm_means);
  return c;
}

sch::Schedule ListsSchedule(const v1::JobSpec& spec, const v1::Plan& plan) {
  sch::Schedule s = PlanToSchedule(spec, plan);
  std::vector<int> own_stage(s.pp, 0);
  for (int k = s.num_stages() - 1; k >= 0; --k) own_stage[s.stage_to_rank[k]] = k;
  for (int r = 0; r < s.pp; ++r) {
    for (sch::Action& a : s.ranks[r]) {
      if (a.op == sch::Op::kProbe || a.op == sch::Op::kOpt) {
        a.mb = 0;
        a.stage = own_stage[r];
      }
    }
  }
  return s;
}

sch::ActionDurations Durations(const sch::Schedule& s, const MeasuredCosts& c, bool with_other_and_comm) {
  sch::ActionDurations d;
  d.comm = with_other_and_comm ? c.comm : 0;
  d.duration.resize(s.ranks.size());
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const sch::Action& a = s.ranks[r][i];
      double v = 0;
      switch (a.op) {
        case sch::Op::kF: v = c.f[a.stage]; break;
        case sch::Op::kB: v = c.b[a.stage]; break;
        case sch::Op::kW: v = c.w[a.stage]; break;
        case sch::Op::kBW: v = c.bw[a.stage]; break;
        default:
          if (with_other_and_comm && r < c.other.size() && i < c.other[r].size()) v = c.other[r][i];
      }
      d.duration[r].push_back(v);
    }
  }
  return d;
}

Result<CalibratedJob> Calibrate(const v1::JobSpec& spec, const v1::Plan& plan, const MeasuredCosts& costs) {
  CalibratedJob j;
  j.schedule = ListsSchedule(spec, plan);
  j.costs = costs;
  const int stages = j.schedule.num_stages();
  for (const std::vector<double>* v : {&costs.f, &costs.b, &costs.w, &costs.bw}) {
    if (static_cast<int>(v->size()) != stages) return InvalidArgument("calibration: one cost per virtual stage expected");
  }
  MeasuredCosts equal = costs;
  for (std::vector<double>* v : {&equal.f, &equal.b, &equal.w, &equal.bw}) {
    const double mean = MeanOr0(*v);
    for (double& x : *v) x = x > 0 ? mean : 0;
  }
  auto run = [&](const MeasuredCosts& c, bool full, sch::Simulation* out) -> Status {
    auto sim = sch::SimulateDurations(j.schedule, Durations(j.schedule, c, full));
    if (!sim.ok()) return InvalidArgument("calibration: the plan cannot be simulated: " + sim.status().message());
    *out = std::move(sim).value();
    return Status::Ok();
  };
  PIPECOORD_RETURN_IF_ERROR(run(equal, false, &j.equal));
  PIPECOORD_RETURN_IF_ERROR(run(costs, false, &j.stages));
  PIPECOORD_RETURN_IF_ERROR(run(costs, true, &j.calibrated));
  j.expect.makespan = j.calibrated.makespan;
  j.expect.ranks.resize(j.schedule.ranks.size());
  j.expect.idle.resize(j.schedule.ranks.size());
  for (size_t r = 0; r < j.schedule.ranks.size(); ++r) {
    for (size_t i = 0; i < j.schedule.ranks[r].size(); ++i) {
      if (!sch::IsCompute(j.schedule.ranks[r][i].op)) continue;
      ComputeSlot slot;
      slot.action_index = static_cast<int>(i);
      slot.action = plan.ranks(static_cast<int>(r)).actions(static_cast<int>(i));
      slot.start = j.calibrated.timing[r][i].start;
      slot.end = j.calibrated.timing[r][i].end;
      j.expect.ranks[r].push_back(slot);
    }
    j.expect.idle[r] = j.calibrated.ranks[r].idle;
  }
  return j;
}

v1::Calibration ToProto(const CalibratedJob& j, double plan_step_s) {
  v1::Calibration c;
  c.set_steps_measured(j.costs.steps);
  for (size_t k = 0; k < j.costs.f.size(); ++k) {
    c.add_stage_f_s(j.costs.f[k]);
    // A fused BW counts as B (its W share is not measured apart).
    c.add_stage_b_s(j.costs.b[k] > 0 ? j.costs.b[k] : j.costs.bw[k]);
    c.add_stage_w_s(j.costs.w[k]);
  }
  c.set_comm_s(j.costs.comm);
  c.set_predicted_step_s(j.calibrated.makespan);
  c.set_predicted_bubble_rate(j.calibrated.bubble_rate);
  for (size_t r = 0; r < j.calibrated.ranks.size(); ++r) {
    for (const sch::Interval& w : j.calibrated.ranks[r].idle) {
      v1::IdleWindow* out = c.add_predicted_idle();
      out->set_rank(static_cast<int>(r));
      out->set_start(w.start);
      out->set_end(w.end);
    }
  }
  c.set_plan_step_s(plan_step_s);
  return c;
}

}  // namespace pipecoord::jobplan
