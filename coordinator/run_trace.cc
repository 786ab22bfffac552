#include "coordinator/run_trace.h"

#include <algorithm>
#include <map>

#include "schedules/json_writer.h"

namespace pipecoord::coordinator {
namespace {

using schedules::JsonNumber;
using schedules::JsonString;

const char* Colour(v1::Op op) {
  switch (op) {
    case v1::F: return "thread_state_running";
    case v1::B: return "rail_response";
    case v1::W: return "rail_animation";
    case v1::BW: return "rail_load";
    case v1::OPT: return "terrible";
    case v1::PROBE: return "yellow";
    default: return "grey";
  }
}

void Event(std::string* out, const std::string& name, int pid, int tid, double ts_us, double dur_us,
           const char* cname, const std::string& args) {
  if (out->back() != '[') *out += ",\n";
  *out += "{\"name\": " + JsonString(name) + ", \"ph\": \"X\", \"pid\": " + std::to_string(pid) +
          ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + JsonNumber(ts_us) +
          ", \"dur\": " + JsonNumber(dur_us) + ", \"cname\": \"" + cname + "\", \"args\": {" + args + "}}";
}

void Meta(std::string* out, const char* what, int pid, int tid, const std::string& name) {
  if (out->back() != '[') *out += ",\n";
  *out += "{\"name\": \"" + std::string(what) + "\", \"ph\": \"M\", \"pid\": " + std::to_string(pid) +
          ", \"tid\": " + std::to_string(tid) + ", \"args\": {\"name\": " + JsonString(name) + "}}";
}

}  // namespace

std::string MeasuredRunTrace(const v1::Job& job, const std::vector<v1::ActionTiming>& actions,
                             const std::vector<int>& ranks) {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  const int pp = std::max(1, job.spec().pp());
  const int world = pp * std::max(1, job.spec().dp());
  Meta(&out, "process_name", 0, 0, job.id() + " measured");
  Meta(&out, "process_name", 1, 0, job.id() + " predicted idle (scaled to each step)");
  for (int g = 0; g < world; ++g) {
    Meta(&out, "thread_name", 0, g, "rank " + std::to_string(g % pp) + " dp " + std::to_string(g / pp));
  }
  for (int r = 0; r < pp; ++r) Meta(&out, "thread_name", 1, r, "rank " + std::to_string(r) + " predicted idle");
  if (actions.empty()) return out + "]}\n";

  int64_t t0 = INT64_MAX;
  std::map<int, std::pair<int64_t, int64_t>> step_span;  // step -> [start, end]
  for (const auto& a : actions) {
    t0 = std::min(t0, a.start_ns());
    auto [it, fresh] = step_span.try_emplace(a.step(), a.start_ns(), a.end_ns());
    if (!fresh) {
      it->second.first = std::min(it->second.first, a.start_ns());
      it->second.second = std::max(it->second.second, a.end_ns());
    }
  }
  for (size_t i = 0; i < actions.size(); ++i) {
    const v1::ActionTiming& a = actions[i];
    const v1::Action& act = a.action();
    const std::string op = v1::Op_Name(act.op());
    const std::string name = op + " mb" + std::to_string(act.microbatch()) + " s" + std::to_string(act.stage());
    Event(&out, name, 0, ranks[i], (a.start_ns() - t0) / 1e3, (a.end_ns() - a.start_ns()) / 1e3, Colour(act.op()),
          "\"op\": \"" + op + "\", \"stage\": " + std::to_string(act.stage()) + ", \"mb\": " +
              std::to_string(act.microbatch()) + ", \"step\": " + std::to_string(a.step()));
  }
  const double makespan = job.plan().predicted_makespan();
  if (makespan > 0) {
    for (const auto& [step, span] : step_span) {
      const double scale = (span.second - span.first) / makespan;  // ns per cost unit
      for (const v1::IdleWindow& w : job.plan().predicted_idle()) {
        Event(&out, "predicted idle", 1, w.rank(), (span.first - t0 + w.start() * scale) / 1e3,
              (w.end() - w.start()) * scale / 1e3, "grey", "\"step\": " + std::to_string(step));
      }
    }
  }
  return out + "]}\n";
}

}  // namespace pipecoord::coordinator
