#include "jobplan/plan_job.h"

#include <string>
#include <utility>
#include <vector>

#include "jobplan/memory_budget.h"
#include "jobplan/spec_validation.h"
#include "jobplan/probe_placement.h"
#include "schedules/partition.h"
#include "schedules/registry.h"
#include "schedules/simulator.h"

namespace pipecoord::jobplan {

namespace sch = pipecoord::schedules;

namespace {

// The schedule engine names its inputs as pipectl's flags ("microbatches: dualpipev needs ...",
// "mem-limit (--mem-limit): ...", "cost-f: ..."); a JobSpec's user wrote spec.microbatches,
// spec.memLimit, spec.costs.f. A message without a field of its own is about the schedule the
// spec names (spec.csvSchedule for an imported one). The code is kept.
Status AsSpecField(const Status& st, const v1::JobSpec& spec) {
  if (st.ok()) return st;
  static const std::pair<const char*, const char*> kFields[] = {
      {"mem-limit (--mem-limit):", "spec.memLimit:"},
      {"mem-limit:", "spec.memLimit:"},
      {"cost-f + cost-b + cost-w:", "spec.costs.f + spec.costs.b + spec.costs.w:"},
      {"cost-f:", "spec.costs.f:"},
      {"cost-b:", "spec.costs.b:"},
      {"cost-w:", "spec.costs.w:"},
      {"cost-comm:", "spec.costs.comm:"},
      {"pp x vpp x microbatches:", "spec.pp x spec.vpp x spec.microbatches:"},
      {"microbatches:", "spec.microbatches:"},
      {"vpp:", "spec.vpp:"},
      {"pp:", "spec.pp:"},
      {"csv:", "spec.csvSchedule:"},
      {"csv ", "spec.csvSchedule: "},
  };
  const std::string& m = st.message();
  for (const auto& [engine, field] : kFields) {
    if (m.rfind(engine, 0) == 0) {
      return Status(st.code(), field + m.substr(std::string(engine).size()));
    }
  }
  return Status(st.code(), (spec.schedule() == "csv" ? "spec.csvSchedule: " : "spec.schedule: ") + m);
}

}  // namespace

Result<v1::Plan> PlanJob(const v1::JobSpec& spec) {
  sch::ScheduleSpec ss;
  ss.pp = spec.pp();
  ss.vpp = spec.vpp();
  ss.microbatches = spec.microbatches();
  ss.costs.f = spec.costs().f();
  ss.costs.b = spec.costs().b();
  ss.costs.w = spec.costs().w();
  ss.costs.comm = spec.costs().comm();
  ss.mem_limit = spec.mem_limit();
  ss.csv = spec.csv_schedule();

  // Placement first (it depends only on the schedule's shape), then costs that follow layers.
  auto order = sch::GenerateComputeOrder(spec.schedule(), ss);
  if (!order.ok()) return AsSpecField(order.status(), spec);  // the engine's code: INVALID_ARGUMENT or UNIMPLEMENTED
  // An imported CSV brings its own shape; pp x dp workers run spec.microbatches each, so they
  // must agree (the engine only refuses a mismatch when the caller gave a value above 1).
  auto agree = [&](const char* field, int given, int found, const char* what) -> Status {
    if (given == found) return Status::Ok();
    return InvalidArgument(std::string("spec.") + field + ": " + std::to_string(given) + ", but spec.csvSchedule has " +
                           std::to_string(found) + " " + what);
  };
  if (spec.schedule() == "csv") {
    PIPECOORD_RETURN_IF_ERROR(agree("pp", spec.pp(), order->pp, "rows (ranks)"));
    PIPECOORD_RETURN_IF_ERROR(agree("vpp", spec.vpp(), order->vpp, "stages per rank"));
    PIPECOORD_RETURN_IF_ERROR(agree("microbatches", spec.microbatches(), order->microbatches, "micro-batches"));
  }
  std::vector<int> rank_layers(spec.stage_layers().begin(), spec.stage_layers().end());
  auto layers = sch::PartitionLayers(spec.model().layers(), order->pp, order->stage_to_rank, rank_layers,
                                     kSpecPartitionFields);
  if (!layers.ok()) return layers.status();
  ss.costs.stage_fraction = sch::StageFractions(std::vector<double>(layers->begin(), layers->end()), order->pp);

  auto schedule = sch::BuildSchedule(spec.schedule(), ss);
  if (!schedule.ok()) return AsSpecField(schedule.status(), spec);
  auto sim = sch::Simulate(*schedule, ss.costs);
  if (!sim.ok()) return AsSpecField(InvalidArgument(sim.status().message()), spec);

  v1::Plan plan;
  for (int r : schedule->stage_to_rank) plan.add_stage_to_rank(r);
  int first = 0;
  const int stages = schedule->num_stages();
  for (int k = 0; k < stages; ++k) {
    v1::StageShard* shard = plan.add_shards();
    shard->set_stage(k);
    shard->set_first_layer(first);
    shard->set_num_layers((*layers)[k]);
    shard->set_has_embedding(k == 0);
    shard->set_has_head(k == stages - 1);
    first += (*layers)[k];
  }
  for (int r = 0; r < schedule->pp; ++r) {
    v1::RankJobs* jobs = plan.add_ranks();
    jobs->set_rank(r);
    for (const sch::Action& a : schedule->ranks[r]) {
      v1::Action* out = jobs->add_actions();
      out->set_op(static_cast<v1::Op>(static_cast<int>(a.op) + 1));  // same order, proto has 0 = unset
      out->set_stage(a.stage);
      out->set_microbatch(a.mb);
      out->set_peer(a.peer);
    }
    v1::Action* opt = jobs->add_actions();
    opt->set_op(v1::OPT);
    int own = 0;
    for (int k = 0; k < stages; ++k) {
      if (schedule->stage_to_rank[k] == r) { own = k; break; }
    }
    opt->set_stage(own);
    opt->set_microbatch(-1);
    opt->set_peer(-1);
    for (const sch::Interval& w : sim->ranks[r].idle) {
      v1::IdleWindow* win = plan.add_predicted_idle();
      win->set_rank(r);
      win->set_start(w.start);
      win->set_end(w.end);
    }
  }
  plan.set_predicted_makespan(sim->makespan);
  plan.set_predicted_bubble_rate(sim->bubble_rate);
  FillMemoryBudgets(spec, &plan);
  PIPECOORD_RETURN_IF_ERROR(PlaceProbes(spec, &plan));  // into the predicted bubbles
  return plan;
}

}  // namespace pipecoord::jobplan
