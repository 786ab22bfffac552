#include "cli/idle_text.h"

#include <cstdio>
#include <map>
#include <utility>

#include "jobplan/idle_breakdown.h"

namespace pipecoord::cli {
namespace {

std::string Format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string Layers(const google::protobuf::RepeatedField<int32_t>& layers) {
  std::string out = "[";
  for (int i = 0; i < layers.size(); ++i) out += (i ? ", " : "") + std::to_string(layers[i]);
  return out + "]";
}

std::string Split(const v1::IdleSplit& s) {
  return Format("inherent %.4f + imbalance %.4f + variation %+.4f + comm %.4f", s.inherent_s(), s.imbalance_s(),
                s.variation_s(), s.comm_s());
}

}  // namespace

std::string PredictionAndIdleText(const v1::Job& j) {
  std::string out;
  if (j.steps_size() == 0) return out;
  if (!j.has_calibration()) {
    const v1::StepRecord& last = j.steps(j.steps_size() - 1);
    out = Format("predicted step %.4f s, bubble %.4f (the plan's: not calibrated yet)\n", last.predicted_step_s(),
                 last.predicted_bubble_rate());
    return out;
  }
  const v1::Calibration& c = j.calibration();
  // Measured means over the steps measured since the calibration (those carrying the split).
  double time = 0, bubble = 0;
  int n = 0;
  v1::IdleSplit total;
  std::map<std::pair<int, int>, std::pair<double, v1::IdleSplit>> per_rank;  // (dp, rank) -> idle, split
  std::map<std::pair<int, int>, int> causes;  // (rank, link_to or -1) -> steps
  for (const v1::StepRecord& s : j.steps()) {
    if (s.idle_size() == 0 || s.step() <= c.last_step()) continue;  // since the calibration in force
    ++n;
    time += s.step_time_s();
    bubble += s.measured_bubble_rate();
    const v1::IdleSplit& t = s.idle_total();
    jobplan::AddIdleSplit(t, &total);
    if (t.cause_rank() >= 0) ++causes[{t.cause_rank(), t.cause_is_link() ? t.cause_link_to() : -1}];
    for (const v1::RankIdle& r : s.idle()) {
      auto& [idle, split] = per_rank[{r.dp_rank(), r.rank()}];
      idle += r.idle_s();
      jobplan::AddIdleSplit(r.split(), &split);
    }
  }
  out += Format("predicted step %.4f s, bubble %.4f (calibrated on %d step(s) to step %d%s; plan %.4f s, %.4f)\n",
                c.predicted_step_s(), c.predicted_bubble_rate(), c.steps_measured(), c.last_step(),
                c.refreshes() > 0 ? Format(", refreshed %d time(s)", c.refreshes()).c_str() : "", c.plan_step_s(),
                j.plan().predicted_bubble_rate());
  if (n == 0) return out;
  const double step_err = c.predicted_step_s() > 0 ? (time / n - c.predicted_step_s()) / c.predicted_step_s() : 0;
  out += Format("measured  step %.4f s (%+.1f %% vs calibrated), bubble %.4f (%+.4f), means over %d step(s) after step %d\n",
                time / n, 100 * step_err, bubble / n, bubble / n - c.predicted_bubble_rate(), n, c.last_step());
  auto scaled = [n](v1::IdleSplit s) {
    s.set_inherent_s(s.inherent_s() / n);
    s.set_imbalance_s(s.imbalance_s() / n);
    s.set_variation_s(s.variation_s() / n);
    s.set_comm_s(s.comm_s() / n);
    return s;
  };
  std::pair<int, int> cause{-1, -1};
  int most = 0;
  for (const auto& [c, count] : causes) {
    if (count > most) {
      cause = c;
      most = count;
    }
  }
  const double idle = total.inherent_s() + total.imbalance_s() + total.variation_s() + total.comm_s();
  out += Format("idle      %.4f s per step over all ranks = %s s", idle / n, Split(scaled(total)).c_str());
  if (cause.first < 0) {
    out += "\n";
  } else if (cause.second < 0) {
    out += Format("; variation mostly from rank %d (%d of %d steps)\n", cause.first, most, n);
  } else {
    out += Format("; mostly from the link from rank %d to rank %d (its inputs left on time and arrived late; %d of "
                  "%d steps)\n", cause.first, cause.second, most, n);
  }
  for (const auto& [key, value] : per_rank) {
    out += Format("  rank %d dp %d  %.4f s = %s s\n", key.second, key.first, value.first / n,
                  Split(scaled(value.second)).c_str());
  }
  if (j.has_rebalance()) {
    out += Format("rebalance stageLayers %s predicted %.1f %% faster (pipectl rebalance %s)\n",
                  Layers(j.rebalance().stage_layers()).c_str(), 100 * j.rebalance().gain(), j.id().c_str());
  }
  return out;
}

std::string RebalanceText(const v1::Job& j) {
  const v1::RebalanceProposal& p = j.rebalance();
  std::string now = j.spec().stage_layers_size() > 0 ? Layers(j.spec().stage_layers()) : "even (spec.stageLayers unset)";
  std::string out = Format("job       %s, %s, pp %d, calibrated on %d step(s)\n", j.id().c_str(),
                           j.spec().schedule().c_str(), j.spec().pp(), j.calibration().steps_measured());
  out += Format("proposal  stageLayers %s (now %s), schedule %s\n", Layers(p.stage_layers()).c_str(), now.c_str(),
                p.schedule().c_str());
  out += Format("predicted step %.4f s -> %.4f s (%.1f %% faster)\n", p.current_step_s(), p.proposed_step_s(),
                100 * p.gain());
  out += "why       " + p.reason() + "\n";
  return out;
}

}  // namespace pipecoord::cli
