#include "schedules/json_format.h"

#include "common/json_writer.h"

namespace pipecoord::schedules {
namespace {

void Job(JsonWriter* w, const Action& a, const Interval& t) {
  w->BeginObject().Key("op").String(OpName(a.op)).Key("stage").Int(a.stage).Key("mb").Int(a.mb);
  w->Key("start").Number(t.start).Key("end").Number(t.end);
  if (IsComm(a.op)) w->Key("peer").Int(a.peer);
  w->EndObject();
}

void Windows(JsonWriter* w, const std::vector<Interval>& windows) {
  w->BeginArray();
  for (const Interval& i : windows) w->BeginArray().Number(i.start).Number(i.end).EndArray();
  w->EndArray();
}

void IntArray(JsonWriter* w, const std::vector<int>& values) {
  w->BeginArray();
  for (int v : values) w->Int(v);
  w->EndArray();
}

}  // namespace

std::string ScheduleToJson(const Schedule& s, const Simulation& sim,
                           const std::vector<int>& stage_layers, std::string_view best_json) {
  JsonWriter w;
  w.BeginObject();
  w.Break("\n  ").Key("schedule").String(s.name);
  w.Break("\n  ").Key("pp").Int(s.pp);
  w.Break("\n  ").Key("vpp").Int(s.vpp);
  w.Break("\n  ").Key("microbatches").Int(s.microbatches);
  w.Break("\n  ").Key("stage_to_rank");
  IntArray(&w, s.stage_to_rank);
  if (!stage_layers.empty()) {
    w.Break("\n  ").Key("stage_layers");
    IntArray(&w, stage_layers);
  }
  w.Break("\n  ").Key("makespan").Number(sim.makespan);
  w.Break("\n  ").Key("bubble_rate").Number(sim.bubble_rate);
  w.Break("\n  ").Key("rank_span_bubble_rate").Number(sim.rank_span_bubble_rate);
  w.Break("\n  ").Key("peak_activations").BeginArray();
  for (const RankStats& st : sim.ranks) w.Number(st.peak_activations);
  w.EndArray();
  if (!best_json.empty()) w.Break("\n  ").Key("best").Raw(best_json);
  w.Break("\n  ").Key("ranks").BeginArray();
  for (int r = 0; r < s.pp; ++r) {
    const bool have_stats = static_cast<size_t>(r) < sim.ranks.size();
    w.Break("\n    ").BeginObject().Key("rank").Int(r).Key("busy").Number(have_stats ? sim.ranks[r].busy : 0);
    w.Key("idle");
    Windows(&w, have_stats ? sim.ranks[r].idle : std::vector<Interval>{});
    w.Break("\n     ").Key("jobs").BeginArray();
    const auto& list = s.ranks[r];
    for (size_t i = 0; i < list.size(); ++i) {
      const bool timed = static_cast<size_t>(r) < sim.timing.size() && i < sim.timing[r].size();
      w.Break("\n       ");
      Job(&w, list[i], timed ? sim.timing[r][i] : Interval{});
    }
    if (!list.empty()) w.Break("\n     ");
    w.EndArray().EndObject();
  }
  if (s.pp > 0) w.Break("\n  ");
  w.EndArray().Break("\n").EndObject();
  return w.Take() + "\n";
}

}  // namespace pipecoord::schedules
