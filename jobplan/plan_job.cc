#include "jobplan/plan_job.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "jobplan/memory_budget.h"
#include "proto/worker_kinds.h"
#include "jobplan/spec_validation.h"
#include "jobplan/plan_convert.h"
#include "jobplan/probe_placement.h"
#include "schedules/best_schedule.h"
#include "schedules/partition.h"
#include "schedules/registry.h"
#include "schedules/simulator.h"

namespace pipecoord::jobplan {

namespace sch = pipecoord::schedules;

namespace {

// The schedule engine names its inputs as pipectl's flags ("microbatches: dualpipev needs ...",
// "mem-limit (--mem-limit): ...", "cost-f: ..."); a JobSpec's user wrote spec.microbatches,
// spec.memLimit, spec.costs.f. Returns false for a message without a field of its own.
bool RenameEngineField(std::string* message) {
  static const std::pair<const char*, const char*> kFields[] = {
      {"mem-limit (--mem-limit):", "spec.memLimit:"},
      {"mem-limit:", "spec.memLimit:"},
      {"cost-f + cost-b + cost-w:", "spec.costs.f + spec.costs.b + spec.costs.w:"},
      {"cost-f:", "spec.costs.f:"},
      {"cost-b:", "spec.costs.b:"},
      {"cost-w:", "spec.costs.w:"},
      {"cost-comm:", "spec.costs.comm:"},
      {"cost-reduce-grad:", "spec.costs.reduceGrad:"},
      {"pp x vpp x microbatches:", "spec.pp x spec.vpp x spec.microbatches:"},
      {"microbatches:", "spec.microbatches:"},
      {"vpp:", "spec.vpp:"},
      {"pp:", "spec.pp:"},
      {"csv:", "spec.csvSchedule:"},
      {"csv ", "spec.csvSchedule: "},
  };
  for (const auto& [engine, field] : kFields) {
    if (message->rfind(engine, 0) == 0) {
      *message = field + message->substr(std::string(engine).size());
      return true;
    }
  }
  return false;
}

// An engine error about the spec's field; a message without a field of its own is about the
// schedule the spec names (spec.csvSchedule for an imported one). The code is kept.
Status AsSpecField(const Status& st, const v1::JobSpec& spec) {
  if (st.ok()) return st;
  std::string m = st.message();
  if (RenameEngineField(&m)) return Status(st.code(), m);
  return Status(st.code(), (spec.schedule() == "csv" ? "spec.csvSchedule: " : "spec.schedule: ") + m);
}

// What every schedule of the spec is built with, but the layer placement.
sch::ScheduleSpec EngineSpec(const v1::JobSpec& spec) {
  sch::ScheduleSpec ss;
  ss.pp = spec.pp();
  ss.vpp = spec.vpp();
  ss.microbatches = spec.microbatches();
  ss.costs.f = spec.costs().f();
  ss.costs.b = spec.costs().b();
  ss.costs.w = spec.costs().w();
  ss.costs.comm = spec.costs().comm();
  ss.costs.reduce_grad = spec.costs().reduce_grad();
  ss.reduce_grads = ReducesGradientsPerStage(spec);
  ss.mem_limit = spec.mem_limit();
  ss.csv = spec.csv_schedule();
  return ss;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

Result<v1::JobSpec> ResolveBestSchedule(const v1::JobSpec& spec, v1::BestScheduleReport* report) {
  sch::BestSpec best;
  best.spec = EngineSpec(spec);
  best.spec.csv.clear();
  const std::vector<int> rank_layers(spec.stage_layers().begin(), spec.stage_layers().end());
  best.place_layers = [&](const std::vector<int>& stage_to_rank) {
    return sch::PartitionLayers(spec.model().layers(), spec.pp(), stage_to_rank, rank_layers, kSpecPartitionFields);
  };
  auto chosen = sch::ChooseBestSchedule(best);
  if (!chosen.ok()) return AsSpecField(chosen.status(), spec);
  if (chosen->ranked.empty()) {
    const std::string limit = spec.mem_limit() > 0 ? "spec.memLimit " + Num(spec.mem_limit())
                                                   : "its own memory (spec.memLimit 0)";
    std::string why;
    for (const sch::BestRefusal& r : chosen->refused) {
      std::string reason = r.reason;
      RenameEngineField(&reason);
      why += (why.empty() ? "" : "; ") + r.schedule + ": " + reason;
    }
    return FailedPrecondition("spec.schedule: \"best\" found no registered schedule for spec.pp " +
                              std::to_string(spec.pp()) + ", spec.vpp " + std::to_string(spec.vpp()) +
                              ", spec.microbatches " + std::to_string(spec.microbatches()) +
                              " and spec.model.layers " + std::to_string(spec.model().layers()) + " within " + limit +
                              ": " + why);
  }
  if (report != nullptr) {
    report->Clear();
    for (const sch::BestCandidate& c : chosen->ranked) {
      v1::BestScheduleChoice* choice = report->add_ranked();
      choice->set_schedule(c.schedule);
      choice->set_vpp(c.vpp);
      choice->set_predicted_makespan(c.makespan);
      choice->set_predicted_bubble_rate(c.bubble_rate);
      choice->set_peak_activations(c.peak_activations);
    }
    for (const sch::BestRefusal& r : chosen->refused) {
      std::string reason = r.reason;
      RenameEngineField(&reason);
      report->add_refused(r.schedule + ": " + reason);
    }
    report->set_mem_limit(spec.mem_limit());
  }
  v1::JobSpec out = spec;
  out.set_schedule(chosen->schedule.name);
  out.set_vpp(chosen->schedule.vpp);
  return out;
}

Result<v1::Plan> PlanJob(const v1::JobSpec& spec) {
  if (IsBest(spec)) {
    auto resolved = ResolveBestSchedule(spec);
    if (!resolved.ok()) return resolved.status();
    return PlanJob(*resolved);
  }
  sch::ScheduleSpec ss = EngineSpec(spec);

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
  PIPECOORD_RETURN_IF_ERROR(AsSpecField(CheckWorkersRun(*schedule, spec.device()), spec));
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
  // The budget recipes model the built-in model: a torch job runs the user's own module, so its
  // ranks are checked against their device memory only (a 0 budget is no budget).
  if (spec.worker().kind() != v1::kTorchWorker) FillMemoryBudgets(spec, &plan);
  return plan;
}

}  // namespace pipecoord::jobplan
