#include "jobplan/rebalance.h"

#include <algorithm>
#include <cstdio>

#include "jobplan/spec_validation.h"
#include "schedules/partition.h"

namespace pipecoord::jobplan {
namespace {

std::vector<double>* Slot(MeasuredCosts& c, int k) {
  std::vector<double>* slots[4] = {&c.f, &c.b, &c.w, &c.bw};
  return slots[k];
}

}  // namespace

LayerCostModel::LayerCostModel(const v1::JobSpec& spec, const v1::Plan& plan, const CalibratedJob& job)
    : spec_(spec), job_(job), stage_to_rank_(plan.stage_to_rank().begin(), plan.stage_to_rank().end()) {
  MeasuredCosts costs = job.costs;
  const int stages = plan.shards_size();
  for (int k = 0; k < 4; ++k) {
    const std::vector<double>& v = *Slot(costs, k);
    if (static_cast<int>(v.size()) != stages) continue;
    // Least squares of cost = fixed + layers x per-layer over the stages (both >= 0); with one
    // layer count everywhere the fixed part cannot be told apart: 0.
    double n = 0, sl = 0, sv = 0, sll = 0, slv = 0;
    for (int s = 0; s < stages; ++s) {
      if (v[s] <= 0) continue;
      const double l = plan.shards(s).num_layers();
      present_[k] = true;
      n += 1;
      sl += l;
      sv += v[s];
      sll += l * l;
      slv += l * v[s];
    }
    if (n == 0) continue;
    const double var = sll - sl * sl / n;
    if (var > 1e-12) {
      layer_[k] = (slv - sl * sv / n) / var;
      fixed_[k] = (sv - layer_[k] * sl) / n;
    }
    if (var <= 1e-12 || layer_[k] < 0 || fixed_[k] < 0) {
      fixed_[k] = 0;
      layer_[k] = sl > 0 ? sv / sl : 0;
    }
    // What the end stages measured beyond the fit: the embedding's and the head's (at least 0).
    for (int s = 0; s < stages; ++s) {
      const v1::StageShard& shard = plan.shards(s);
      const double extra = std::max(0.0, v[s] - fixed_[k] - shard.num_layers() * layer_[k]);
      if (shard.has_head()) {
        head_[k] = extra;  // a stage with both (pp 1, vpp 1): the extra counts as the head's
      } else if (shard.has_embedding()) {
        embedding_[k] = extra;
      }
    }
  }
}

Result<MeasuredCosts> LayerCostModel::CostsFor(const std::vector<int>& rank_layers) const {
  auto layers = schedules::PartitionLayers(spec_.model().layers(), spec_.pp(), stage_to_rank_, rank_layers,
                                           kSpecPartitionFields);
  if (!layers.ok()) return layers.status();
  MeasuredCosts c = job_.costs;
  const int stages = static_cast<int>(layers->size());
  for (int k = 0; k < 4; ++k) {
    std::vector<double>& v = *Slot(c, k);
    v.assign(stages, 0);
    if (!present_[k]) continue;
    for (int s = 0; s < stages; ++s) {
      v[s] = fixed_[k] + (*layers)[s] * layer_[k] + (s == 0 ? embedding_[k] : 0) + (s == stages - 1 ? head_[k] : 0);
    }
  }
  return c;
}

Result<double> LayerCostModel::StepSeconds(const std::vector<int>& rank_layers) const {
  auto c = CostsFor(rank_layers);
  if (!c.ok()) return c.status();
  auto full = schedules::SimulateDurations(job_.schedule, Durations(job_.schedule, *c, true));
  if (!full.ok()) return InvalidArgument("rebalance: the plan cannot be simulated: " + full.status().message());
  return full->makespan;
}

Result<PlacementPrediction> LayerCostModel::Predict(const std::vector<int>& rank_layers) const {
  auto placed = CostsFor(rank_layers);
  if (!placed.ok()) return placed.status();
  const MeasuredCosts& c = *placed;
  const int stages = static_cast<int>(c.f.size());
  const schedules::Schedule& sched = job_.schedule;
  auto run = [&](const MeasuredCosts& costs, bool full) { return schedules::SimulateDurations(sched, Durations(sched, costs, full)); };
  MeasuredCosts equal = c;
  for (int k = 0; k < 4; ++k) {
    std::vector<double>& v = *Slot(equal, k);
    double sum = 0;
    for (double x : v) sum += x;
    for (double& x : v) x = sum / std::max(1, stages);
  }
  auto full = run(c, true);
  auto uneven = run(c, false);
  auto even = run(equal, false);
  for (const auto* sim : {&full, &uneven, &even}) {
    if (!sim->ok()) return InvalidArgument("rebalance: the plan cannot be simulated: " + sim->status().message());
  }
  PlacementPrediction p;
  p.step_s = full->makespan;
  for (int r = 0; r < spec_.pp(); ++r) p.imbalance_idle_s += SimIdle(*uneven, r) - SimIdle(*even, r);
  return p;
}

std::string LayerCostModel::Describe() const {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "per layer F %.3f ms, B %.3f ms, W %.3f ms, BW %.3f ms; per stage +%.3f ms, embedding +%.3f ms, "
                "head +%.3f ms (all ops)",
                layer_[0] * 1e3, layer_[1] * 1e3, layer_[2] * 1e3, layer_[3] * 1e3,
                (fixed_[0] + fixed_[1] + fixed_[2] + fixed_[3]) * 1e3,
                (embedding_[0] + embedding_[1] + embedding_[2] + embedding_[3]) * 1e3,
                (head_[0] + head_[1] + head_[2] + head_[3]) * 1e3);
  return buf;
}

std::vector<int> RankLayers(const v1::JobSpec& spec, const v1::Plan& plan) {
  if (spec.stage_layers_size() > 0) return {spec.stage_layers().begin(), spec.stage_layers().end()};
  std::vector<int> out(spec.pp(), 0);
  for (int s = 0; s < plan.shards_size() && s < plan.stage_to_rank_size(); ++s) {
    const int r = plan.stage_to_rank(s);
    if (r >= 0 && r < spec.pp()) out[r] += plan.shards(s).num_layers();
  }
  return out;
}

Result<std::optional<v1::RebalanceProposal>> ProposeRebalance(const v1::JobSpec& spec, const v1::Plan& plan,
                                                              const CalibratedJob& job, double min_gain) {
  const LayerCostModel model(spec, plan, job);
  const std::vector<int> current = RankLayers(spec, plan);
  auto now = model.Predict(current);
  if (!now.ok()) return now.status();
  const int pp = spec.pp(), layers = spec.model().layers();
  std::vector<int> even(pp, layers / pp);
  for (int r = 0; r < layers % pp; ++r) ++even[r];
  std::vector<int> best = current;
  double best_s = now->step_s;
  for (const std::vector<int>& start : {current, even}) {
    auto at = model.StepSeconds(start);
    if (!at.ok()) continue;
    std::vector<int> here = start;
    double here_s = *at;
    // Hill climbing: the best single-layer move while it helps (each move lowers the step time,
    // so it ends).
    for (bool moved = true; moved;) {
      moved = false;
      std::vector<int> next;
      double next_s = here_s;
      for (int from = 0; from < pp; ++from) {
        for (int to = 0; to < pp; ++to) {
          if (from == to || here[from] <= 1) continue;
          std::vector<int> cand = here;
          --cand[from];
          ++cand[to];
          auto s = model.StepSeconds(cand);
          if (s.ok() && *s < next_s * (1 - 1e-9)) {
            next = cand;
            next_s = *s;
          }
        }
      }
      if (!next.empty()) {
        here = next;
        here_s = next_s;
        moved = true;
      }
    }
    if (here_s < best_s) {
      best = here;
      best_s = here_s;
    }
  }
  const double gain = now->step_s > 0 ? 1 - best_s / now->step_s : 0;
  if (gain < min_gain) return std::optional<v1::RebalanceProposal>();
  auto best_prediction = model.Predict(best);
  if (!best_prediction.ok()) return best_prediction.status();
  const PlacementPrediction& best_p = *best_prediction;
  v1::RebalanceProposal out;
  for (int l : best) out.add_stage_layers(l);
  out.set_schedule(spec.schedule());
  out.set_current_step_s(now->step_s);
  out.set_proposed_step_s(best_p.step_s);
  out.set_gain(gain);
  char buf[160];
  std::snprintf(buf, sizeof buf, "idle from stage imbalance %.4f s -> %.4f s per step (summed over ranks); ",
                now->imbalance_idle_s, best_p.imbalance_idle_s);
  out.set_reason(buf + model.Describe());
  return std::optional<v1::RebalanceProposal>(std::move(out));
}

}  // namespace pipecoord::jobplan
