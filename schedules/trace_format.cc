#include "schedules/trace_format.h"

#include <vector>

#include "schedules/json_writer.h"

namespace pipecoord::schedules {
namespace {

constexpr double kMicrosPerUnit = 1000.0;  // 1 cost unit = 1 ms

const char* Colour(Op op) {
  switch (op) {
    case Op::kF: return "thread_state_running";
    case Op::kB: return "rail_response";
    case Op::kW: return "rail_animation";
    case Op::kBW: return "rail_load";
    case Op::kProbe: return "yellow";
    case Op::kOpt: return "olive";
    default: return "generic_work";
  }
}

std::string Us(double t) { return JsonNumber(t * kMicrosPerUnit); }

std::string Args(const Action& a) {
  std::string out = "{\"op\": " + JsonString(OpName(a.op)) + ", \"stage\": " + std::to_string(a.stage) +
                    ", \"mb\": " + std::to_string(a.mb);
  if (IsComm(a.op)) out += ", \"peer\": " + std::to_string(a.peer);
  return out + "}";
}

std::string Name(const Action& a) {
  std::string out = std::string(OpName(a.op)) + " mb" + std::to_string(a.mb) + " s" + std::to_string(a.stage);
  if (IsComm(a.op)) out += (IsSend(a.op) ? " -> " : " <- ") + std::to_string(a.peer);
  return out;
}

std::string Meta(const char* name, int tid, const std::string& args) {
  return "{\"ph\": \"M\", \"pid\": 0, \"tid\": " + std::to_string(tid) + ", \"name\": " +
         JsonString(name) + ", \"args\": " + args + "}";
}

}  // namespace

std::string ScheduleToTrace(const Schedule& s, const Simulation& sim) {
  std::vector<std::string> events;
  events.push_back(Meta("process_name", 0, "{\"name\": " + JsonString("pipecoord " + s.name) + "}"));
  for (int r = 0; r < s.pp; ++r) {
    events.push_back(Meta("thread_name", r, "{\"name\": " + JsonString("rank " + std::to_string(r)) + "}"));
    events.push_back(Meta("thread_sort_index", r, "{\"sort_index\": " + std::to_string(r) + "}"));
  }
  for (int r = 0; r < s.pp; ++r) {
    const std::string track = "\"pid\": 0, \"tid\": " + std::to_string(r);
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const Action& a = s.ranks[r][i];
      const bool timed = static_cast<size_t>(r) < sim.timing.size() && i < sim.timing[r].size();
      const Interval t = timed ? sim.timing[r][i] : Interval{};
      const std::string head = "{\"name\": " + JsonString(Name(a)) + ", \"cat\": " +
                               JsonString(IsComm(a.op) ? "comm" : "compute");
      if (IsComm(a.op)) {
        events.push_back(head + ", \"ph\": \"i\", \"s\": \"t\", \"ts\": " + Us(t.start) + ", " + track +
                         ", \"cname\": \"generic_work\", \"args\": " + Args(a) + "}");
      } else {
        events.push_back(head + ", \"ph\": \"X\", \"ts\": " + Us(t.start) + ", \"dur\": " +
                         Us(t.end - t.start) + ", " + track + ", \"cname\": " + JsonString(Colour(a.op)) +
                         ", \"args\": " + Args(a) + "}");
      }
    }
    if (static_cast<size_t>(r) < sim.ranks.size()) {
      for (const Interval& idle : sim.ranks[r].idle) {
        events.push_back("{\"name\": \"bubble\", \"cat\": \"idle\", \"ph\": \"X\", \"ts\": " + Us(idle.start) +
                         ", \"dur\": " + Us(idle.end - idle.start) + ", " + track +
                         ", \"cname\": \"grey\", \"args\": {}}");
      }
    }
  }
  std::string out = "{\"displayTimeUnit\": \"ms\",\n";
  out += " \"otherData\": {\"schedule\": " + JsonString(s.name) + ", \"pp\": " + std::to_string(s.pp) +
         ", \"vpp\": " + std::to_string(s.vpp) + ", \"microbatches\": " + std::to_string(s.microbatches) +
         ", \"time_unit\": \"1 cost unit = 1 ms\", \"makespan_ms\": " + JsonNumber(sim.makespan) +
         ", \"bubble_rate\": " + JsonNumber(sim.bubble_rate) + "},\n";
  out += " \"traceEvents\": [";
  for (size_t i = 0; i < events.size(); ++i) out += (i == 0 ? "\n  " : ",\n  ") + events[i];
  out += "\n ]}\n";
  return out;
}

}  // namespace pipecoord::schedules
