#include "jobplan/plan_job.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "jobplan/memory_budget.h"
#include "jobplan/spec_validation.h"
#include "jobplan/plan_convert.h"
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

  // Placement first (it depends only on the schedule's shape), then the costs that follow the
  // layers, then the schedule, generated once with them (zb-auto's search runs once).
  std::vector<int> stage_to_rank;
  if (spec.schedule() == "csv") {
    // An imported CSV brings its own shape; pp x dp workers run spec.microbatches each, so they
    // must agree (the engine only refuses a mismatch when the caller gave a value above 1).
    auto order = sch::GenerateComputeOrder(spec.schedule(), ss);  // a parse
    if (!order.ok()) return AsSpecField(order.status(), spec);
    auto agree = [&](const char* field, int given, int found, const char* what) -> Status {
      if (given == found) return Status::Ok();
      return InvalidArgument(std::string("spec.") + field + ": " + std::to_string(given) + ", but spec.csvSchedule has " +
                             std::to_string(found) + " " + what);
    };
    PIPECOORD_RETURN_IF_ERROR(agree("pp", spec.pp(), order->pp, "rows (ranks)"));
    PIPECOORD_RETURN_IF_ERROR(agree("vpp", spec.vpp(), order->vpp, "stages per rank"));
    PIPECOORD_RETURN_IF_ERROR(agree("microbatches", spec.microbatches(), order->microbatches, "micro-batches"));
    stage_to_rank = order->stage_to_rank;
  } else {
    auto placed = sch::PlaceStages(spec.schedule(), ss);
    if (!placed.ok()) return AsSpecField(placed.status(), spec);
    stage_to_rank = std::move(placed).value();
  }
  std::vector<int> rank_layers(spec.stage_layers().begin(), spec.stage_layers().end());
  auto layers = sch::PartitionLayers(spec.model().layers(), spec.pp(), stage_to_rank, rank_layers, kSpecPartitionFields);
  if (!layers.ok()) return layers.status();
  ss.costs.stage_fraction = sch::StageFractions(std::vector<double>(layers->begin(), layers->end()), spec.pp());

  auto schedule = sch::BuildSchedule(spec.schedule(), ss);
  if (!schedule.ok()) return AsSpecField(schedule.status(), spec);
  auto sim = sch::Simulate(*schedule, ss.costs);  // the one simulation of the plan
  if (!sim.ok()) return AsSpecField(InvalidArgument(sim.status().message()), spec);

  // PROBE inside each rank's longest predicted bubble, OPT after the last micro-batch: both are
  // schedule actions, so the plan's lists come from one converter.
  const bool equal_stages = std::all_of(layers->begin(), layers->end(), [&](int n) { return n == layers->front(); });
  PlaceProbes(spec, ChooseProbeWindows(spec, *schedule, *sim, equal_stages), &*schedule);
  for (int r = 0; r < schedule->pp; ++r) {
    sch::Action opt;
    opt.op = sch::Op::kOpt;
    opt.stage = static_cast<int>(std::find(schedule->stage_to_rank.begin(), schedule->stage_to_rank.end(), r) -
                                 schedule->stage_to_rank.begin());  // the rank's first stage
    opt.mb = -1;
    opt.peer = -1;
    schedule->ranks[r].push_back(opt);
  }

  v1::Plan plan;
  ScheduleToPlan(*schedule, &plan);
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
  return plan;
}

}  // namespace pipecoord::jobplan
