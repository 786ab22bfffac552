#include "coordinator/http/dashboard_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace pipecoord::coordinator::http {
namespace {

std::string Num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string State(v1::JobState s) { return JsonString(v1::JobState_Name(s)); }

std::string EventJson(const v1::HealthEvent& e) {
  return "{\"kind\":" + JsonString(v1::EventKind_Name(e.kind())) + ",\"rank\":" + std::to_string(e.rank()) +
         ",\"dp\":" + std::to_string(e.dp_rank()) + ",\"step\":" + std::to_string(e.step()) +
         ",\"unix_ms\":" + std::to_string(e.unix_ms()) + ",\"message\":" + JsonString(e.message()) + "}";
}

}  // namespace

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\' || c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string JobsJson(const std::vector<v1::Job>& jobs) {
  std::string out = "{\"jobs\":[";
  for (size_t i = 0; i < jobs.size(); ++i) {
    const v1::Job& j = jobs[i];
    int health = 0;
    for (const v1::HealthEvent& e : j.events()) health += e.kind() != v1::LIFECYCLE;
    out += (i ? "," : "") + std::string("{\"id\":") + JsonString(j.id()) + ",\"name\":" + JsonString(j.spec().name()) +
           ",\"state\":" + State(j.state()) + ",\"schedule\":" + JsonString(j.spec().schedule()) +
           ",\"pp\":" + std::to_string(j.spec().pp()) + ",\"dp\":" + std::to_string(j.spec().dp()) +
           ",\"steps_done\":" + std::to_string(j.steps_done()) + ",\"steps\":" + std::to_string(j.spec().steps()) +
           ",\"loss\":" + (j.steps_size() ? Num(j.steps(j.steps_size() - 1).loss()) : "null") +
           ",\"health_events\":" + std::to_string(health) + "}";
  }
  return out + "]}";
}

std::string WorkersJson(const std::vector<v1::WorkerInfo>& workers) {
  std::string out = "{\"workers\":[";
  for (size_t i = 0; i < workers.size(); ++i) {
    const v1::WorkerInfo& w = workers[i];
    out += (i ? "," : "") + std::string("{\"id\":") + JsonString(w.worker_id()) + ",\"host\":" + JsonString(w.host()) +
           ",\"device\":" + JsonString(w.device_kind()) + ",\"endpoint\":" + JsonString(w.data_endpoint()) +
           ",\"job\":" + JsonString(w.job_id()) + ",\"rank\":" + std::to_string(w.rank()) +
           ",\"lease_ms\":" + std::to_string(w.lease_expires_in_ms()) + "}";
  }
  return out + "]}";
}

std::string JobDetailJson(const v1::Job& j, const health::HealthSnapshot& h) {
  const int pp = std::max(1, j.spec().pp());
  std::string out = "{\"id\":" + JsonString(j.id()) + ",\"name\":" + JsonString(j.spec().name()) +
                    ",\"state\":" + State(j.state()) + ",\"schedule\":" + JsonString(j.spec().schedule()) +
                    ",\"pp\":" + std::to_string(pp) + ",\"dp\":" + std::to_string(j.spec().dp()) +
                    ",\"steps_done\":" + std::to_string(j.steps_done()) + ",\"steps\":" + std::to_string(j.spec().steps()) +
                    ",\"failure_cause\":" + JsonString(j.failure_cause()) +
                    ",\"predicted_bubble_rate\":" + Num(j.plan().predicted_bubble_rate()) +
                    ",\"health\":{\"enabled\":" + (h.enabled ? "true" : "false") +
                    ",\"seconds_per_cost\":" + Num(h.seconds_per_cost) + ",\"predicted_step_s\":" + Num(h.predicted_step_s) +
                    ",\"hang_deadline_s\":" + Num(h.hang_deadline_s) +
                    ",\"probes_checked\":" + std::to_string(h.probes_checked) + "}";
  // Timeline: the last steps' actions, in seconds from the earliest start shown; each step's
  // predicted idle windows start where that step's first action started.
  int64_t origin = INT64_MAX;
  std::map<int, int64_t> step_origin;
  for (const v1::ActionTiming& t : h.recent) {
    origin = std::min(origin, t.start_ns());
    auto it = step_origin.find(t.step());
    if (it == step_origin.end() || t.start_ns() < it->second) step_origin[t.step()] = t.start_ns();
  }
  out += ",\"timeline\":{\"actions\":[";
  for (size_t i = 0; i < h.recent.size(); ++i) {
    const v1::ActionTiming& t = h.recent[i];
    const int g = h.recent_rank[i];
    out += (i ? "," : "") + std::string("{\"rank\":") + std::to_string(g % pp) + ",\"dp\":" + std::to_string(g / pp) +
           ",\"row\":" + std::to_string(g) + ",\"step\":" + std::to_string(t.step()) +
           ",\"op\":" + JsonString(v1::Op_Name(t.action().op())) + ",\"stage\":" + std::to_string(t.action().stage()) +
           ",\"mb\":" + std::to_string(t.action().microbatch()) + ",\"start_s\":" + Num((t.start_ns() - origin) * 1e-9) +
           ",\"end_s\":" + Num((t.end_ns() - origin) * 1e-9) + ",\"wait_s\":" + Num(t.wait_ns() * 1e-9) + "}";
  }
  out += "],\"predicted_idle\":[";
  bool first = true;
  if (h.seconds_per_cost > 0) {
    const int world = pp * std::max(1, j.spec().dp());
    for (const auto& [step, start] : step_origin) {
      for (const v1::IdleWindow& w : j.plan().predicted_idle()) {
        for (int g = w.rank(); g < world; g += pp) {
          const double s0 = (start - origin) * 1e-9 + w.start() * h.seconds_per_cost;
          const double s1 = (start - origin) * 1e-9 + w.end() * h.seconds_per_cost;
          out += (first ? "" : ",") + std::string("{\"row\":") + std::to_string(g) + ",\"step\":" + std::to_string(step) +
                 ",\"start_s\":" + Num(s0) + ",\"end_s\":" + Num(s1) + "}";
          first = false;
        }
      }
    }
  }
  out += "]},\"events\":[";
  for (int i = 0; i < j.events_size(); ++i) out += (i ? "," : "") + EventJson(j.events(i));
  out += "],\"memory\":[";
  for (size_t g = 0; g < h.peak_bytes.size(); ++g) {
    out += (g ? "," : "") + std::string("{\"rank\":") + std::to_string(g % pp) + ",\"dp\":" + std::to_string(g / pp) +
           ",\"peak_bytes\":" + std::to_string(h.peak_bytes[g]) +
           ",\"budget_bytes\":" + std::to_string(g < h.budget_bytes.size() ? h.budget_bytes[g] : 0) + "}";
  }
  out += "],\"scores\":[";
  for (size_t i = 0; i < h.scores.size(); ++i) {
    const health::StragglerScore& s = h.scores[i];
    out += (i ? "," : "") + std::string("{\"rank\":") + std::to_string(s.global_rank % pp) +
           ",\"dp\":" + std::to_string(s.global_rank / pp) + ",\"op\":" + JsonString(v1::Op_Name(s.op)) +
           ",\"relative\":" + Num(s.relative) + ",\"individual\":" + Num(s.individual) + "}";
  }
  out += "],\"steps_recent\":[";
  const int n = j.steps_size(), from = std::max(0, n - 50);
  for (int i = from; i < n; ++i) {
    const v1::StepRecord& s = j.steps(i);
    out += (i > from ? "," : "") + std::string("{\"step\":") + std::to_string(s.step()) + ",\"loss\":" + Num(s.loss()) +
           ",\"step_time_s\":" + Num(s.step_time_s()) + ",\"bubble\":" + Num(s.measured_bubble_rate()) + "}";
  }
  return out + "]}";
}

}  // namespace pipecoord::coordinator::http
