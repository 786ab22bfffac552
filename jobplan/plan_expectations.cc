#include "jobplan/plan_expectations.h"

#include "schedules/partition.h"

namespace pipecoord::jobplan {

namespace sch = pipecoord::schedules;

sch::Schedule PlanSchedule(const v1::JobSpec& spec, const v1::Plan& plan, std::vector<std::vector<int>>* index) {
  std::vector<int> stage_to_rank(plan.stage_to_rank().begin(), plan.stage_to_rank().end());
  sch::Schedule s = sch::MakeSchedule(spec.schedule(), spec.pp(), std::max(1, spec.vpp()), spec.microbatches(),
                                      stage_to_rank);
  s.ranks.assign(plan.ranks_size(), {});
  if (index != nullptr) index->assign(plan.ranks_size(), {});
  for (int r = 0; r < plan.ranks_size(); ++r) {
    const v1::RankJobs& jobs = plan.ranks(r);
    for (int i = 0; i < jobs.actions_size(); ++i) {
      const v1::Action& a = jobs.actions(i);
      if (a.op() == v1::PROBE || a.op() == v1::OPT || a.op() == v1::OP_UNSPECIFIED) continue;
      sch::Action out;
      out.op = static_cast<sch::Op>(static_cast<int>(a.op()) - 1);  // proto has 0 = unset
      out.stage = a.stage();
      out.mb = a.microbatch();
      out.peer = a.peer();
      s.ranks[r].push_back(out);
      if (index != nullptr) (*index)[r].push_back(i);
    }
  }
  return s;
}

sch::CostModel PlanCosts(const v1::JobSpec& spec, const v1::Plan& plan) {
  sch::CostModel c;
  c.f = spec.costs().f();
  c.b = spec.costs().b();
  c.w = spec.costs().w();
  c.comm = spec.costs().comm();
  std::vector<double> layers;
  for (const v1::StageShard& s : plan.shards()) layers.push_back(s.num_layers());
  if (!layers.empty()) c.stage_fraction = sch::StageFractions(layers, spec.pp());
  return c;
}

Result<PlanExpectations> ExpectPlan(const v1::JobSpec& spec, const v1::Plan& plan) {
  std::vector<std::vector<int>> index;
  const sch::Schedule s = PlanSchedule(spec, plan, &index);
  auto sim = sch::Simulate(s, PlanCosts(spec, plan));
  if (!sim.ok()) return InvalidArgument("plan: cannot be simulated: " + sim.status().message());
  PlanExpectations e;
  e.makespan = sim->makespan;
  e.ranks.resize(s.ranks.size());
  e.idle.resize(s.ranks.size());
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      if (!sch::IsCompute(s.ranks[r][i].op)) continue;
      ComputeSlot slot;
      slot.action_index = index[r][i];
      slot.action = plan.ranks(static_cast<int>(r)).actions(index[r][i]);
      slot.start = sim->timing[r][i].start;
      slot.end = sim->timing[r][i].end;
      e.ranks[r].push_back(slot);
    }
    e.idle[r] = sim->ranks[r].idle;
  }
  return e;
}

}  // namespace pipecoord::jobplan
