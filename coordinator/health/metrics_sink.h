// MetricsSink: where the coordinator's measurements go besides the job store (the Prometheus
// exporter in coordinator/http implements it). Thread-safe implementations only: calls come
// from under the coordinator's lock and from its ingest thread outside it (a round's checks), so
// they must be quick and must not call back into it.
#ifndef PIPECOORD_COORDINATOR_HEALTH_METRICS_SINK_H_
#define PIPECOORD_COORDINATOR_HEALTH_METRICS_SINK_H_

#include <cstdint>
#include <string>

#include "common/rank_layout.h"

namespace pipecoord::coordinator::health {

// Which rank a per-rank series is of: its pipeline rank ("rank"), replica ("dp"; -1: summed over
// replicas, no such label) and, in jobs with tensor parallelism only, its shard ("tp"; -1: no such
// label, so pp x dp jobs keep theirs).
struct RankLabel {
  int rank = 0;
  int dp = 0;
  int tp = -1;
};
inline RankLabel LabelOf(const RankLayout& layout, int global) {
  return {layout.PipelineRank(global), layout.DataRank(global), layout.tp() > 1 ? layout.TensorRank(global) : -1};
}
// Per-rank series (action histograms, idle splits, straggler scores, memory) are per rank up to
// this many ranks in the job. A bigger job's are per pipeline rank (a histogram is ~20 lines of
// /metrics and a rank has ~13 gauges: per rank, a 4,096-rank job's page was 77 MiB, then 4 MiB
// with the histograms alone folded): the histograms sum its replicas' and shards' actions; the
// gauges hold, over its replicas and shards, the highest memory peak and reserved bytes of the
// newest step reported, the lowest straggler score of the last scored step (the most suspicious),
// and the mean idle split of the last step (PipelineRankAggregate below).
constexpr int kPerRankSeriesMaxRanks = 512;
inline bool PerRankSeries(const RankLayout& layout) { return layout.world() <= kPerRankSeriesMaxRanks; }
inline RankLabel PipelineRankLabel(int rank) { return {rank, -1, -1}; }
// The dashboard's timeline keeps every rank's recent actions up to kPerRankSeriesMaxRanks ranks;
// a bigger job's, the first replica's pipeline only (dp 0, tp 0): at 16,384 ranks every rank's
// last steps were 12 M action records held by the coordinator and sent with each page.
inline bool InTimeline(const RankLayout& layout, int global) {
  return PerRankSeries(layout) || (layout.DataRank(global) == 0 && layout.TensorRank(global) == 0);
}
inline RankLabel ActionLabelOf(const RankLayout& layout, int global) {
  if (PerRankSeries(layout)) return LabelOf(layout, global);
  return PipelineRankLabel(layout.PipelineRank(global));
}

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;
  // One measured action of a rank.
  virtual void Action(const std::string& job, const RankLabel& at, int stage, const std::string& op, double seconds) = 0;
  // A step every rank finished: its span and bubble rates (0..1).
  virtual void Step(const std::string& job, double step_seconds, double measured_bubble, double predicted_bubble) = 0;
  // One rank's idle time in a step, split by cause (seconds; jobplan/idle_breakdown.h).
  virtual void Idle(const std::string& job, const RankLabel& at, double inherent, double imbalance, double variation,
                    double comm) = 0;
  // The predictions after each step: the plan's (makespan x seconds per cost unit) and the
  // calibrated ones (0 until the job is calibrated).
  virtual void Predicted(const std::string& job, double plan_step_s, double plan_bubble, double calibrated_step_s,
                         double calibrated_bubble) = 0;
  virtual void Straggler(const std::string& job, const RankLabel& at, const std::string& op, double relative,
                         double individual) = 0;
  virtual void Memory(const std::string& job, const RankLabel& at, uint64_t peak_bytes, uint64_t budget_bytes,
                      uint64_t reserved_bytes) = 0;
  // The validation loss measured after a step (spec.evalEvery), in nats, and in bits per byte
  // for byte-level data (jobplan::ByteLevel; negative: not byte-level).
  virtual void Validation(const std::string& /*job*/, double /*loss_nats*/, double /*bits_per_byte*/) {}
  // A step's global gradient norm before clipping (negative: not computed by the backend) and
  // the learning rate its optimizer step used.
  virtual void Optimizer(const std::string& /*job*/, double /*grad_norm*/, double /*learning_rate*/) {}
  // kind: "LIFECYCLE", "BUBBLE", "STRAGGLER", "HANG", "MEMORY", "SDC".
  virtual void Event(const std::string& job, const std::string& kind) = 0;
  // A lost rank recovered without a restart (`path`: "spare"), in `seconds` from the loss being
  // detected to the first step measured after it.
  virtual void Recovery(const std::string& /*job*/, const std::string& /*path*/, double /*seconds*/) {}
  // The job left the coordinator (dropped to make room, --max-jobs): its series go with it, so
  // a long-lived coordinator's exposition does not grow with every job it ever ran.
  virtual void ForgetJob(const std::string& job) = 0;
};

}  // namespace pipecoord::coordinator::health

#endif  // PIPECOORD_COORDINATOR_HEALTH_METRICS_SINK_H_
