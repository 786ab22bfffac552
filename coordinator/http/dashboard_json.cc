#include "coordinator/http/dashboard_json.h"

#include <algorithm>
#include <map>

#include "common/json_writer.h"

namespace pipecoord::coordinator::http {
namespace {

JsonWriter Writer() { return JsonWriter(JsonWriter::Style::kCompact, JsonEscape::kHtmlSafe); }

void Event(JsonWriter* w, const v1::HealthEvent& e) {
  w->BeginObject().Key("kind").String(v1::EventKind_Name(e.kind())).Key("rank").Int(e.rank());
  w->Key("dp").Int(e.dp_rank()).Key("step").Int(e.step()).Key("unix_ms").Int(e.unix_ms());
  w->Key("message").String(e.message()).EndObject();
}

}  // namespace

std::string ErrorJson(std::string_view message) {
  JsonWriter w = Writer();
  w.BeginObject().Key("error").String(message).EndObject();
  return w.Take();
}

std::string JobsJson(const std::vector<v1::Job>& jobs) {
  JsonWriter w = Writer();
  w.BeginObject().Key("jobs").BeginArray();
  for (const v1::Job& j : jobs) {
    int health = 0;
    for (const v1::HealthEvent& e : j.events()) health += e.kind() != v1::LIFECYCLE;
    w.BeginObject().Key("id").String(j.id()).Key("name").String(j.spec().name());
    w.Key("state").String(v1::JobState_Name(j.state())).Key("schedule").String(j.spec().schedule());
    w.Key("pp").Int(j.spec().pp()).Key("dp").Int(j.spec().dp());
    w.Key("steps_done").Int(j.steps_done()).Key("steps").Int(j.spec().steps());
    w.Key("loss");
    if (j.steps_size()) {
      w.Number(j.steps(j.steps_size() - 1).loss());
    } else {
      w.Null();
    }
    w.Key("health_events").Int(health).EndObject();
  }
  w.EndArray().EndObject();
  return w.Take();
}

std::string WorkersJson(const std::vector<v1::WorkerInfo>& workers) {
  JsonWriter w = Writer();
  w.BeginObject().Key("workers").BeginArray();
  for (const v1::WorkerInfo& wi : workers) {
    w.BeginObject().Key("id").String(wi.worker_id()).Key("host").String(wi.host());
    w.Key("device").String(wi.device_kind()).Key("endpoint").String(wi.data_endpoint());
    w.Key("job").String(wi.job_id()).Key("rank").Int(wi.rank());
    w.Key("lease_ms").Int(wi.lease_expires_in_ms()).EndObject();
  }
  w.EndArray().EndObject();
  return w.Take();
}

std::string JobDetailJson(const v1::Job& j, const health::HealthSnapshot& h) {
  const int pp = std::max(1, j.spec().pp());
  JsonWriter w = Writer();
  w.BeginObject().Key("id").String(j.id()).Key("name").String(j.spec().name());
  w.Key("state").String(v1::JobState_Name(j.state())).Key("schedule").String(j.spec().schedule());
  w.Key("pp").Int(pp).Key("dp").Int(j.spec().dp());
  w.Key("steps_done").Int(j.steps_done()).Key("steps").Int(j.spec().steps());
  w.Key("failure_cause").String(j.failure_cause());
  w.Key("predicted_bubble_rate").Number(j.plan().predicted_bubble_rate());
  w.Key("health").BeginObject().Key("enabled").Bool(h.enabled);
  w.Key("seconds_per_cost").Number(h.seconds_per_cost).Key("predicted_step_s").Number(h.predicted_step_s);
  w.Key("hang_deadline_s").Number(h.hang_deadline_s).Key("probes_checked").Int(h.probes_checked);
  w.EndObject();
  // Timeline: the last steps' actions, in seconds from the earliest start shown; each step's
  // predicted idle windows start where that step's first action started.
  int64_t origin = INT64_MAX;
  std::map<int, int64_t> step_origin;
  for (const v1::ActionTiming& t : h.recent) {
    origin = std::min(origin, t.start_ns());
    auto it = step_origin.find(t.step());
    if (it == step_origin.end() || t.start_ns() < it->second) step_origin[t.step()] = t.start_ns();
  }
  w.Key("timeline").BeginObject().Key("actions").BeginArray();
  for (size_t i = 0; i < h.recent.size(); ++i) {
    const v1::ActionTiming& t = h.recent[i];
    const int g = h.recent_rank[i];
    w.BeginObject().Key("rank").Int(g % pp).Key("dp").Int(g / pp).Key("row").Int(g).Key("step").Int(t.step());
    w.Key("op").String(v1::Op_Name(t.action().op())).Key("stage").Int(t.action().stage());
    w.Key("mb").Int(t.action().microbatch()).Key("start_s").Number((t.start_ns() - origin) * 1e-9);
    w.Key("end_s").Number((t.end_ns() - origin) * 1e-9).Key("wait_s").Number(t.wait_ns() * 1e-9);
    w.EndObject();
  }
  w.EndArray().Key("predicted_idle").BeginArray();
  if (h.seconds_per_cost > 0) {
    const int world = pp * std::max(1, j.spec().dp());
    for (const auto& [step, start] : step_origin) {
      for (const v1::IdleWindow& iw : j.plan().predicted_idle()) {
        for (int g = iw.rank(); g < world; g += pp) {
          const double s0 = (start - origin) * 1e-9 + iw.start() * h.seconds_per_cost;
          const double s1 = (start - origin) * 1e-9 + iw.end() * h.seconds_per_cost;
          w.BeginObject().Key("row").Int(g).Key("step").Int(step).Key("start_s").Number(s0);
          w.Key("end_s").Number(s1).EndObject();
        }
      }
    }
  }
  w.EndArray().EndObject();
  w.Key("events").BeginArray();
  for (const v1::HealthEvent& e : j.events()) Event(&w, e);
  w.EndArray().Key("memory").BeginArray();
  for (size_t g = 0; g < h.peak_bytes.size(); ++g) {
    w.BeginObject().Key("rank").Int(g % pp).Key("dp").Int(g / pp).Key("peak_bytes").Uint(h.peak_bytes[g]);
    w.Key("budget_bytes").Uint(g < h.budget_bytes.size() ? h.budget_bytes[g] : 0).EndObject();
  }
  w.EndArray().Key("scores").BeginArray();
  for (const health::StragglerScore& s : h.scores) {
    w.BeginObject().Key("rank").Int(s.global_rank % pp).Key("dp").Int(s.global_rank / pp);
    w.Key("op").String(v1::Op_Name(s.op)).Key("relative").Number(s.relative);
    w.Key("individual").Number(s.individual).EndObject();
  }
  w.EndArray().Key("steps_recent").BeginArray();
  const int n = j.steps_size(), from = std::max(0, n - 50);
  for (int i = from; i < n; ++i) {
    const v1::StepRecord& s = j.steps(i);
    w.BeginObject().Key("step").Int(s.step()).Key("loss").Number(s.loss());
    w.Key("step_time_s").Number(s.step_time_s()).Key("bubble").Number(s.measured_bubble_rate()).EndObject();
  }
  w.EndArray().EndObject();
  return w.Take();
}

}  // namespace pipecoord::coordinator::http
