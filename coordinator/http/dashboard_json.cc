#include "coordinator/http/dashboard_json.h"

#include <algorithm>
#include <limits>
#include <map>

#include "common/json_writer.h"
#include "jobplan/data_spec.h"
#include "jobplan/layout.h"

namespace pipecoord::coordinator::http {
namespace {

JsonWriter Writer() { return JsonWriter(JsonWriter::Style::kCompact, JsonEscape::kHtmlSafe); }

// Opens global rank g's object with its coordinates ("rank" is its pipeline rank).
void Coords(JsonWriter* w, const RankLayout& layout, int g) {
  w->BeginObject().Key("rank").Int(layout.PipelineRank(g)).Key("dp").Int(layout.DataRank(g));
  if (layout.tp() > 1) w->Key("tp").Int(layout.TensorRank(g));
}

void Event(JsonWriter* w, const v1::HealthEvent& e) {
  w->BeginObject().Key("kind").String(v1::EventKind_Name(e.kind())).Key("rank").Int(e.rank());
  w->Key("dp").Int(e.dp_rank()).Key("step").Int(e.step()).Key("unix_ms").Int(e.unix_ms());
  w->Key("message").String(e.message()).EndObject();
}

// An array of `n` numbers, `value(i)` for each; NaN is written null (JsonNumber's rule), which
// the page reads as "no point here".
template <typename F>
void NumberArray(JsonWriter* w, int n, F value) {
  w->BeginArray();
  for (int i = 0; i < n; ++i) w->Number(value(i));
  w->EndArray();
}

constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

// The curves, one array per quantity with one element per step record. Job.steps is already in
// step order with one record per step: a restart drops the records from its restart point
// (JobRecord::DropStepsFrom) and Restore drops the ones a later attempt replaced, so the newest
// record of a step is the only one left.
void StepSeries(JsonWriter* w, const v1::Job& j, int world) {
  const auto& steps = j.steps();
  const int n = steps.size();
  w->Key("series").BeginObject().Key("step").BeginArray();
  for (const v1::StepRecord& s : steps) w->Int(s.step());
  w->EndArray();
  w->Key("loss");
  NumberArray(w, n, [&](int i) { return steps[i].loss(); });
  // Validation (spec.evalEvery), only in jobs that have it: nats, and bits per byte for
  // byte-level data; null on the steps without a validation pass.
  if (std::any_of(steps.begin(), steps.end(), [](const v1::StepRecord& s) { return s.has_val_loss(); })) {
    w->Key("val_loss");
    NumberArray(w, n, [&](int i) { return steps[i].has_val_loss() ? steps[i].val_loss() : kNoValue; });
    if (jobplan::ByteLevel(j.spec())) {
      w->Key("val_bits_per_byte");
      NumberArray(w, n, [&](int i) {
        return steps[i].has_val_loss() ? jobplan::BitsPerByte(steps[i].val_loss()) : kNoValue;
      });
    }
  }
  // The global gradient norm (null where the backend computed none) and the learning rate.
  w->Key("grad_norm");
  NumberArray(w, n, [&](int i) { return steps[i].has_grad_norm() ? steps[i].grad_norm() : kNoValue; });
  w->Key("learning_rate");
  NumberArray(w, n, [&](int i) { return steps[i].learning_rate(); });
  w->Key("step_time_s");
  NumberArray(w, n, [&](int i) { return steps[i].step_time_s(); });
  w->Key("bubble");
  NumberArray(w, n, [&](int i) { return steps[i].measured_bubble_rate(); });
  // A step time of 0 cannot be predicted: 0 means the record carries no prediction (a rate of 0
  // can be real, so the step time decides for both).
  auto predicted = [&](int i) { return steps[i].predicted_step_s() > 0; };
  w->Key("predicted_step_s");
  NumberArray(w, n, [&](int i) { return predicted(i) ? steps[i].predicted_step_s() : kNoValue; });
  w->Key("predicted_bubble");
  NumberArray(w, n, [&](int i) { return predicted(i) ? steps[i].predicted_bubble_rate() : kNoValue; });
  // Idle seconds summed over ranks, split by cause; null where the step has no split.
  auto split = [&](int i) -> const v1::IdleSplit* { return steps[i].has_idle_total() ? &steps[i].idle_total() : nullptr; };
  w->Key("idle").BeginObject().Key("inherent_s");
  NumberArray(w, n, [&](int i) { return split(i) ? split(i)->inherent_s() : kNoValue; });
  w->Key("imbalance_s");
  NumberArray(w, n, [&](int i) { return split(i) ? split(i)->imbalance_s() : kNoValue; });
  w->Key("variation_s");
  NumberArray(w, n, [&](int i) { return split(i) ? split(i)->variation_s() : kNoValue; });
  w->Key("comm_s");
  NumberArray(w, n, [&](int i) { return split(i) ? split(i)->comm_s() : kNoValue; });
  w->Key("cause_rank").BeginArray();
  for (int i = 0; i < n; ++i) w->Int(split(i) ? split(i)->cause_rank() : -1);
  w->EndArray().EndObject();
  // Per global rank, its peak in each step (bytes; null where the record has none for it).
  w->Key("peak_bytes").BeginArray();
  for (int g = 0; g < world; ++g) {
    w->BeginArray();
    for (const v1::StepRecord& s : steps) {
      if (g < s.peak_memory_bytes_size()) {
        w->Uint(s.peak_memory_bytes(g));
      } else {
        w->Null();
      }
    }
    w->EndArray();
  }
  w->EndArray().EndObject();
}

void Calibration(JsonWriter* w, const v1::Job& j) {
  w->Key("calibration");
  if (!j.has_calibration()) {
    w->Null();
    return;
  }
  const v1::Calibration& c = j.calibration();
  w->BeginObject().Key("steps_measured").Int(c.steps_measured());
  w->Key("predicted_step_s").Number(c.predicted_step_s()).Key("predicted_bubble_rate").Number(c.predicted_bubble_rate());
  w->Key("plan_step_s").Number(c.plan_step_s()).Key("comm_s").Number(c.comm_s());
  auto costs = [&](const char* key, const google::protobuf::RepeatedField<double>& v) {
    w->Key(key);
    NumberArray(w, v.size(), [&](int i) { return v[i]; });
  };
  costs("stage_f_s", c.stage_f_s());
  costs("stage_b_s", c.stage_b_s());
  costs("stage_w_s", c.stage_w_s());
  w->EndObject();
}

void Rebalance(JsonWriter* w, const v1::Job& j, int pp) {
  w->Key("rebalance");
  if (!j.has_rebalance()) {
    w->Null();
    return;
  }
  const v1::RebalanceProposal& r = j.rebalance();
  // The running placement's layers per rank, beside the proposed ones.
  std::vector<int> current(pp, 0);
  for (const v1::StageShard& sh : j.plan().shards()) {
    const int rank = sh.stage() < j.plan().stage_to_rank_size() ? j.plan().stage_to_rank(sh.stage()) : -1;
    if (rank >= 0 && rank < pp) current[rank] += sh.num_layers();
  }
  w->BeginObject().Key("current_stage_layers").BeginArray();
  for (int l : current) w->Int(l);
  w->EndArray().Key("stage_layers").BeginArray();
  for (int l : r.stage_layers()) w->Int(l);
  w->EndArray().Key("schedule").String(r.schedule()).Key("current_step_s").Number(r.current_step_s());
  w->Key("proposed_step_s").Number(r.proposed_step_s()).Key("gain").Number(r.gain());
  w->Key("reason").String(r.reason()).EndObject();
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
  const RankLayout layout = jobplan::LayoutOf(j.spec());
  JsonWriter w = Writer();
  w.BeginObject().Key("id").String(j.id()).Key("name").String(j.spec().name());
  w.Key("state").String(v1::JobState_Name(j.state())).Key("schedule").String(j.spec().schedule());
  w.Key("pp").Int(layout.pp()).Key("dp").Int(j.spec().dp());
  if (layout.tp() > 1) w.Key("tp").Int(layout.tp());
  w.Key("steps_done").Int(j.steps_done()).Key("steps").Int(j.spec().steps());
  w.Key("failure_cause").String(j.failure_cause());
  w.Key("recovering").String(j.recovering()).Key("recoveries").Int(j.recoveries()).Key("restarts").Int(j.restarts());
  w.Key("predicted_bubble_rate").Number(j.plan().predicted_bubble_rate());
  w.Key("clip_grad_norm").Number(j.spec().optimizer().clip_grad_norm());
  w.Key("health").BeginObject().Key("enabled").Bool(h.enabled);
  w.Key("seconds_per_cost").Number(h.seconds_per_cost).Key("predicted_step_s").Number(h.predicted_step_s);
  w.Key("hang_deadline_s").Number(h.hang_deadline_s).Key("probes_checked").Int(h.probes_checked)
      .Key("replays_checked").Int(h.replays_checked);
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
    Coords(&w, layout, g);
    w.Key("row").Int(g).Key("step").Int(t.step());
    w.Key("op").String(v1::Op_Name(t.action().op())).Key("stage").Int(t.action().stage());
    w.Key("mb").Int(t.action().microbatch()).Key("start_s").Number((t.start_ns() - origin) * 1e-9);
    w.Key("end_s").Number((t.end_ns() - origin) * 1e-9).Key("wait_s").Number(t.wait_ns() * 1e-9);
    w.EndObject();
  }
  w.EndArray().Key("predicted_idle").BeginArray();
  if (h.seconds_per_cost > 0) {
    for (const auto& [step, start] : step_origin) {
      for (const v1::IdleWindow& iw : j.plan().predicted_idle()) {
        for (int g = 0; g < layout.world(); ++g) {
          if (layout.PipelineRank(g) != iw.rank() || !health::InTimeline(layout, g)) continue;
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
    Coords(&w, layout, static_cast<int>(g));
    w.Key("peak_bytes").Uint(h.peak_bytes[g]);
    w.Key("budget_bytes").Uint(g < h.budget_bytes.size() ? h.budget_bytes[g] : 0).EndObject();
  }
  w.EndArray().Key("scores").BeginArray();
  for (const health::StragglerScore& s : h.scores) {
    Coords(&w, layout, s.global_rank);
    w.Key("op").String(v1::Op_Name(s.op)).Key("relative").Number(s.relative);
    w.Key("individual").Number(s.individual).EndObject();
  }
  w.EndArray();
  const int world = layout.world();
  StepSeries(&w, j, world);
  // Every replica and shard of pipeline rank r has rank r's budget.
  w.Key("budget_bytes").BeginArray();
  for (int g = 0; g < world; ++g) {
    const int r = layout.PipelineRank(g);
    w.Uint(r < j.plan().memory_budget_bytes_size() ? j.plan().memory_budget_bytes(r) : 0);
  }
  w.EndArray();
  Calibration(&w, j);
  Rebalance(&w, j, layout.pp());
  w.EndObject();
  return w.Take();
}

}  // namespace pipecoord::coordinator::http
