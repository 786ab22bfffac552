#include "jobplan/plan_expectations.h"

#include "jobplan/plan_convert.h"
#include "schedules/partition.h"

namespace pipecoord::jobplan {

namespace sch = pipecoord::schedules;

sch::Schedule PlanSchedule(const v1::JobSpec& spec, const v1::Plan& plan, std::vector<std::vector<int>>* index) {
  sch::Schedule s = PlanToSchedule(spec, plan);
  if (index != nullptr) index->assign(s.ranks.size(), {});
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    std::vector<sch::Action> kept;
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const v1::Op op = plan.ranks(static_cast<int>(r)).actions(static_cast<int>(i)).op();
      if (op == v1::PROBE || op == v1::OPT || op == v1::OP_UNSPECIFIED) continue;
      kept.push_back(s.ranks[r][i]);
      if (index != nullptr) (*index)[r].push_back(static_cast<int>(i));
    }
    s.ranks[r] = std::move(kept);
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
