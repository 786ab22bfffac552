#include "schedules/json_format.h"

#include "schedules/json_writer.h"

namespace pipecoord::schedules {
namespace {

std::string Job(const Action& a, const Interval& t) {
  std::string out = "{\"op\": " + JsonString(OpName(a.op)) +
                    ", \"stage\": " + std::to_string(a.stage) +
                    ", \"mb\": " + std::to_string(a.mb) + ", \"start\": " + JsonNumber(t.start) +
                    ", \"end\": " + JsonNumber(t.end);
  if (IsComm(a.op)) out += ", \"peer\": " + std::to_string(a.peer);
  return out + "}";
}

std::string Windows(const std::vector<Interval>& windows) {
  std::string out = "[";
  for (size_t i = 0; i < windows.size(); ++i) {
    if (i > 0) out += ", ";
    out += "[" + JsonNumber(windows[i].start) + ", " + JsonNumber(windows[i].end) + "]";
  }
  return out + "]";
}

}  // namespace

std::string ScheduleToJson(const Schedule& s, const Simulation& sim,
                           const std::vector<int>& stage_layers) {
  std::vector<double> peaks;
  for (const RankStats& st : sim.ranks) peaks.push_back(st.peak_activations);
  std::string out = "{\n";
  out += "  \"schedule\": " + JsonString(s.name) + ",\n";
  out += "  \"pp\": " + std::to_string(s.pp) + ",\n";
  out += "  \"vpp\": " + std::to_string(s.vpp) + ",\n";
  out += "  \"microbatches\": " + std::to_string(s.microbatches) + ",\n";
  out += "  \"stage_to_rank\": " + JsonIntArray(s.stage_to_rank) + ",\n";
  if (!stage_layers.empty()) out += "  \"stage_layers\": " + JsonIntArray(stage_layers) + ",\n";
  out += "  \"makespan\": " + JsonNumber(sim.makespan) + ",\n";
  out += "  \"bubble_rate\": " + JsonNumber(sim.bubble_rate) + ",\n";
  out += "  \"rank_span_bubble_rate\": " + JsonNumber(sim.rank_span_bubble_rate) + ",\n";
  out += "  \"peak_activations\": " + JsonNumberArray(peaks) + ",\n";
  out += "  \"ranks\": [";
  for (int r = 0; r < s.pp; ++r) {
    const bool have_stats = static_cast<size_t>(r) < sim.ranks.size();
    out += r == 0 ? "\n" : ",\n";
    out += "    {\"rank\": " + std::to_string(r) +
           ", \"busy\": " + JsonNumber(have_stats ? sim.ranks[r].busy : 0) +
           ", \"idle\": " + Windows(have_stats ? sim.ranks[r].idle : std::vector<Interval>{}) +
           ",\n     \"jobs\": [";
    const auto& list = s.ranks[r];
    for (size_t i = 0; i < list.size(); ++i) {
      const bool timed = static_cast<size_t>(r) < sim.timing.size() && i < sim.timing[r].size();
      out += i == 0 ? "\n" : ",\n";
      out += "       " + Job(list[i], timed ? sim.timing[r][i] : Interval{});
    }
    out += list.empty() ? "]}" : "\n     ]}";
  }
  out += s.pp > 0 ? "\n  ]\n}\n" : "]\n}\n";
  return out;
}

}  // namespace pipecoord::schedules
