// PipelineRankAggregate: a job's per-rank gauges (memory, idle split, straggler scores) on their
// way to the MetricsSink. Up to kPerRankSeriesMaxRanks ranks each rank's values go through as
// they come; above, each pipeline rank gets one series (no dp or tp label) holding, over its
// replicas and shards (metrics_sink.h says why):
//   memory     the highest peak and reserved bytes of the newest step reported so far (a rank's
//              older step after a newer one is left out); the budget is the pipeline rank's
//   idle       the mean of each cause over the ranks of one step's split (FlushIdle)
//   straggler  the lowest relative and individual score of one evaluation (FlushStraggler)
// Not thread-safe: its owner (JobMonitor, metrics replay) calls it under its own lock.
#ifndef PIPECOORD_COORDINATOR_HEALTH_METRICS_AGGREGATE_H_
#define PIPECOORD_COORDINATOR_HEALTH_METRICS_AGGREGATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/rank_layout.h"
#include "coordinator/health/metrics_sink.h"

namespace pipecoord::coordinator::health {

class PipelineRankAggregate {
 public:
  // `sink` may be null (every call then does nothing); not owned.
  PipelineRankAggregate(const RankLayout& layout, std::string job_id, MetricsSink* sink);

  bool per_rank() const { return per_rank_; }

  // Global rank g's memory at `step`.
  void Memory(int g, int step, uint64_t peak_bytes, uint64_t budget_bytes, uint64_t reserved_bytes);
  // One rank's idle split of a step; FlushIdle after the step's last.
  void AddIdle(const RankLabel& at, double inherent, double imbalance, double variation, double comm);
  void FlushIdle();
  // One rank's scores for one kind of action; FlushStraggler after the evaluation's last.
  void AddStraggler(int g, const std::string& op, double relative, double individual);
  void FlushStraggler();

 private:
  struct WorstMemory {
    int step = -1;
    uint64_t peak = 0, reserved = 0;
  };
  struct IdleSum {
    double inherent = 0, imbalance = 0, variation = 0, comm = 0;
    int n = 0;
  };
  RankLayout layout_;
  std::string job_;
  MetricsSink* sink_;
  bool per_rank_;
  std::vector<WorstMemory> memory_;                                    // per pipeline rank
  std::map<int, IdleSum> idle_;                                        // pipeline rank -> sums
  std::map<std::pair<int, std::string>, std::pair<double, double>> straggler_;  // (rank, op) -> lowest
};

}  // namespace pipecoord::coordinator::health

#endif  // PIPECOORD_COORDINATOR_HEALTH_METRICS_AGGREGATE_H_
