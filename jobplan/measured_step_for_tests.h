// Telemetry as workers would report it if every action took the given time: the plan's lists
// simulated (schedules::SimulateDurations) and written as ActionTimings, with wait_ns and
// wait_peer as the executor sets them. For calibration, idle-split and coordinator tests.
#ifndef PIPECOORD_JOBPLAN_MEASURED_STEP_FOR_TESTS_H_
#define PIPECOORD_JOBPLAN_MEASURED_STEP_FOR_TESTS_H_

#include <cmath>
#include <vector>

#include "jobplan/layout.h"
#include "jobplan/calibration.h"
#include "jobplan/plan_convert.h"

namespace pipecoord::jobplan {

// Durations of the plan's actions: F and BW/B/W per stage from f_s/bw_s scaled by each stage's
// layers (seconds per layer), every OPT `opt_s`, other actions 0; `slow` multiplies the compute
// of one pipeline rank (-1: none) by `factor`.
inline schedules::ActionDurations PlanDurations(const v1::JobSpec& spec, const v1::Plan& plan, double f_s, double b_s,
                                                double w_s, double opt_s, double comm_s, int slow = -1,
                                                double factor = 1) {
  const schedules::Schedule s = ListsSchedule(spec, plan);
  schedules::ActionDurations d;
  d.comm = comm_s;
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    auto& row = d.duration.emplace_back();
    const double k = static_cast<int>(r) == slow ? factor : 1.0;
    for (const schedules::Action& a : s.ranks[r]) {
      const double layers = a.stage < plan.shards_size() ? plan.shards(a.stage).num_layers() : 1;
      switch (a.op) {
        case schedules::Op::kF: row.push_back(k * f_s * layers); break;
        case schedules::Op::kB: row.push_back(k * b_s * layers); break;
        case schedules::Op::kW: row.push_back(k * w_s * layers); break;
        case schedules::Op::kBW: row.push_back(k * (b_s + w_s) * layers); break;
        case schedules::Op::kOpt: row.push_back(opt_s); break;
        default: row.push_back(0);
      }
    }
  }
  return d;
}

// One step of every global rank (each replica alike) starting at t0_ns.
inline StepActions SimulatedStep(const v1::JobSpec& spec, const v1::Plan& plan, const schedules::ActionDurations& d,
                                 int step, int64_t t0_ns) {
  const schedules::Schedule s = ListsSchedule(spec, plan);
  const schedules::Simulation sim = schedules::SimulateDurations(s, d).value();
  const RankLayout layout = LayoutOf(spec);
  const int world = layout.world();
  auto ns = [&](double sec) { return t0_ns + static_cast<int64_t>(std::llround(sec * 1e9)); };
  StepActions out(world);
  for (int g = 0; g < world; ++g) {
    const int r = layout.PipelineRank(g);
    double prev_end = 0;
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      v1::ActionTiming t;
      *t.mutable_action() = plan.ranks(r).actions(static_cast<int>(i));
      t.set_step(step);
      t.set_start_ns(ns(sim.timing[r][i].start));
      t.set_end_ns(ns(sim.timing[r][i].end));
      const schedules::Action& a = s.ranks[r][i];
      int peer = -1;
      if (a.op == schedules::Op::kF && a.stage > 0) peer = s.stage_to_rank[a.stage - 1];
      if ((a.op == schedules::Op::kB || a.op == schedules::Op::kBW) && a.stage + 1 < s.num_stages()) {
        peer = s.stage_to_rank[a.stage + 1];
      }
      if (schedules::IsCompute(a.op)) {
        t.set_wait_peer(peer == r ? -1 : peer);
        t.set_wait_ns(peer >= 0 && peer != r ? std::max<int64_t>(0, t.start_ns() - ns(prev_end)) : 0);
      } else {
        t.set_wait_peer(-1);
      }
      prev_end = sim.timing[r][i].end;
      out[g].push_back(std::move(t));
    }
  }
  return out;
}

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_MEASURED_STEP_FOR_TESTS_H_
