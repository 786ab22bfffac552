#include "schedules/best_schedule.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "common/json_writer.h"
#include "schedules/partition.h"
#include "schedules/registry.h"
#include "schedules/simulator.h"

namespace pipecoord::schedules {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// 9 significant digits: orders that differ only by rounding compare equal.
double Rounded(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return std::strtod(buf, nullptr);
}

struct Built {
  Schedule schedule;
  Simulation simulation;
  CostModel costs;
  std::vector<int> stage_layers;
};

// One registered schedule at the spec's shape: placed, built (comm pass and validator), simulated.
Result<Built> BuildOne(const ScheduleInfo& info, const BestSpec& best) {
  ScheduleSpec spec = best.spec;
  if (spec.vpp == 0) spec.vpp = info.default_vpp;
  if (info.required_vpp != 0 && spec.vpp != info.required_vpp) {
    return InvalidArgument("vpp: schedule " + std::string(info.name) + " places exactly " +
                           std::to_string(info.required_vpp) + " chunk(s) per rank, got " + std::to_string(spec.vpp));
  }
  Built out;
  if (best.place_layers) {
    auto placement = PlaceStages(info.name, spec);
    if (!placement.ok()) return placement.status();
    auto layers = best.place_layers(*placement);
    if (!layers.ok()) return layers.status();
    out.stage_layers = std::move(layers).value();
    spec.costs.stage_fraction =
        StageFractions(std::vector<double>(out.stage_layers.begin(), out.stage_layers.end()), spec.pp);
  }
  auto schedule = BuildSchedule(info.name, spec);
  if (!schedule.ok()) return schedule.status();
  auto sim = Simulate(*schedule, spec.costs);
  if (!sim.ok()) return sim.status();
  out.schedule = std::move(schedule).value();
  out.simulation = std::move(sim).value();
  out.costs = spec.costs;
  return out;
}

BestCandidate Describe(const Built& b) {
  BestCandidate c;
  c.schedule = b.schedule.name;
  c.vpp = b.schedule.vpp;
  c.makespan = b.simulation.makespan;
  c.bubble_rate = b.simulation.bubble_rate;
  for (size_t r = 0; r < b.simulation.ranks.size(); ++r) {
    const RankStats& st = b.simulation.ranks[r];
    c.rank_span = std::max(c.rank_span, st.last_end - st.first_start);
    if (r == 0 || st.peak_activations > c.peak_activations) {
      c.peak_activations = st.peak_activations;
      c.peak_rank = static_cast<int>(r);
    }
  }
  return c;
}

}  // namespace

Result<BestResult> ChooseBestSchedule(const BestSpec& best) {
  const ScheduleSpec& spec = best.spec;
  // The shape's own errors once, as the registry words them, rather than once per schedule.
  if (spec.pp < 1) return InvalidArgument("pp: must be >= 1, got " + std::to_string(spec.pp));
  if (spec.microbatches < 1) {
    return InvalidArgument("microbatches: must be >= 1, got " + std::to_string(spec.microbatches));
  }
  if (spec.vpp < 0) return InvalidArgument("vpp: must be >= 1, got " + std::to_string(spec.vpp));
  if (!(spec.mem_limit >= 0)) return InvalidArgument("mem-limit: must be >= 0, got " + Num(spec.mem_limit));
  if (!spec.costs.stage_fraction.empty()) {
    return InvalidArgument("stage_fraction: schedule best places the layers on each schedule's own stages; "
                           "give the layers instead");
  }
  PIPECOORD_RETURN_IF_ERROR(ValidateCostModel(spec.costs, spec.pp, spec.pp));

  struct Entry {
    BestCandidate candidate;
    int order;
    Built built;
  };
  std::vector<Entry> fits;
  BestResult result;
  const auto& all = AllSchedules();
  for (size_t i = 0; i < all.size(); ++i) {
    const ScheduleInfo& info = all[i];
    if (std::string_view(info.name) == "csv") continue;
    auto built = BuildOne(info, best);
    if (!built.ok()) {
      result.refused.push_back({info.name, built.status().message()});
      continue;
    }
    BestCandidate c = Describe(*built);
    if (spec.mem_limit > 0 && !WithinMemLimit(c.peak_activations, spec.mem_limit)) {
      result.refused.push_back({info.name, "peak activations " + Num(c.peak_activations) + " on rank " +
                                               std::to_string(c.peak_rank) + ", above the memory limit " +
                                               Num(spec.mem_limit)});
      continue;
    }
    fits.push_back({std::move(c), static_cast<int>(i), std::move(built).value()});
  }
  if (fits.empty()) return result;
  std::stable_sort(fits.begin(), fits.end(), [](const Entry& a, const Entry& b) {
    const BestCandidate &x = a.candidate, &y = b.candidate;
    return std::make_tuple(Rounded(x.makespan), Rounded(x.rank_span), Rounded(x.peak_activations), a.order) <
           std::make_tuple(Rounded(y.makespan), Rounded(y.rank_span), Rounded(y.peak_activations), b.order);
  });
  for (const Entry& e : fits) result.ranked.push_back(e.candidate);
  Built& winner = fits.front().built;
  result.schedule = std::move(winner.schedule);
  result.simulation = std::move(winner.simulation);
  result.costs = std::move(winner.costs);
  result.stage_layers = std::move(winner.stage_layers);
  return result;
}

std::string BestFailure(const BestResult& r, double mem_limit,
                        const std::function<std::string(const std::string&)>& word) {
  std::string out = "no schedule runs this shape" +
                    (mem_limit > 0 ? " within the memory limit " + Num(mem_limit) : std::string()) + ":";
  for (size_t i = 0; i < r.refused.size(); ++i) {
    out += (i == 0 ? " " : "; ") + r.refused[i].schedule + ": " + (word ? word(r.refused[i].reason) : r.refused[i].reason);
  }
  return out;
}

std::string BestRankingToJson(const BestResult& r, double mem_limit) {
  JsonWriter w;
  w.BeginObject().Key("measure").String(kBestMeasure).Key("mem_limit").Number(mem_limit);
  w.Key("winner").String(r.ranked.empty() ? "" : r.ranked.front().schedule);
  w.Break("\n    ").Key("ranked").BeginArray();
  for (const BestCandidate& c : r.ranked) {
    w.Break("\n      ").BeginObject().Key("schedule").String(c.schedule).Key("vpp").Int(c.vpp).Key("makespan").Number(c.makespan);
    w.Key("rank_span").Number(c.rank_span).Key("bubble_rate").Number(c.bubble_rate);
    w.Key("peak_activations").Number(c.peak_activations).Key("peak_rank").Int(c.peak_rank).EndObject();
  }
  if (!r.ranked.empty()) w.Break("\n    ");
  w.EndArray().Break("\n    ").Key("refused").BeginArray();
  for (const BestRefusal& f : r.refused) w.Break("\n      ").BeginObject().Key("schedule").String(f.schedule).Key("reason").String(f.reason).EndObject();
  if (!r.refused.empty()) w.Break("\n    ");
  w.EndArray().Break("\n  ").EndObject();
  return w.Take();
}

}  // namespace pipecoord::schedules
