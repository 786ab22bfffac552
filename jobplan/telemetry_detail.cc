#include "jobplan/telemetry_detail.h"

#include <algorithm>
#include <map>
#include <utility>

#include "jobplan/health_settings.h"
#include "jobplan/layout.h"

namespace pipecoord::jobplan {

TelemetryDetail TelemetryDetailOf(const v1::JobSpec& spec) {
  const v1::HealthConfig& c = spec.health();
  const HealthSettings h = ResolveHealth(c);
  const bool large = LayoutOf(spec).world() > kDetailEveryStepUpToRanks;
  TelemetryDetail d;
  d.every = c.detail_every() > 0 ? c.detail_every() : (large ? kDefaultDetailEvery : 1);
  d.first = h.warmup_steps + h.calibration_steps;
  d.from = c.detail_from();
  d.steps = c.detail_steps();
  d.tp_speaker = c.tp_speaker() == "on" || (c.tp_speaker().empty() && large);
  d.first_replica = c.detail_replicas() == "first" || (c.detail_replicas().empty() && large);
  return d;
}

int SpeakerGroup(const v1::JobSpec& spec) {
  return TelemetryDetailOf(spec).tp_speaker ? LayoutOf(spec).tp() : 1;
}

void FoldAction(const v1::ActionTiming& t, v1::ActionTotals* k) {
  const int64_t d = t.end_ns() - t.start_ns();
  if (k->count() == 0) {
    k->set_step(t.step());
    k->set_stage(t.action().stage());
    k->set_op(t.action().op());
    k->set_first_start_ns(t.start_ns());
    k->set_last_end_ns(t.end_ns());
    k->set_fastest_ns(d);
  } else {
    k->set_first_start_ns(std::min(k->first_start_ns(), t.start_ns()));
    k->set_last_end_ns(std::max(k->last_end_ns(), t.end_ns()));
    k->set_fastest_ns(std::min(k->fastest_ns(), d));
  }
  k->set_count(k->count() + 1);
  k->set_busy_ns(k->busy_ns() + d);
  k->set_wait_ns(k->wait_ns() + t.wait_ns());
  k->set_tp_comm_ns(k->tp_comm_ns() + t.tp_comm_ns());
  k->set_tp_comm_bytes(k->tp_comm_bytes() + t.tp_comm_bytes());
  k->set_dp_comm_bytes(k->dp_comm_bytes() + t.dp_comm_bytes());
  k->set_recompute_ns(k->recompute_ns() + t.recompute_ns());
}

void PutStepTimings(const TelemetryDetail& detail, int dp_rank, int tp_rank, int step,
                    std::vector<v1::ActionTiming> actions, v1::TelemetryBatch* b) {
  if (!detail.Speaks(tp_rank)) return;
  if (detail.InDetail(step, dp_rank)) {
    for (v1::ActionTiming& t : actions) *b->add_actions() = std::move(t);
    return;
  }
  std::map<std::pair<int, int>, int> index;  // (stage, op) -> totals entry
  for (v1::ActionTiming& t : actions) {
    if (t.action().op() == v1::PROBE) {  // its checksums are the check
      *b->add_actions() = std::move(t);
      continue;
    }
    const auto [it, added] = index.try_emplace({t.action().stage(), static_cast<int>(t.action().op())}, b->totals_size());
    FoldAction(t, added ? b->add_totals() : b->mutable_totals(it->second));
  }
}

}  // namespace pipecoord::jobplan
