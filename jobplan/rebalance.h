// Rebalance: a layer placement (stageLayers) the measured stage costs suggest.
//
// Per op (F, B, W, BW) a stage's measured cost is modelled as a fixed part (per action: launch,
// copies) plus layers x per-layer cost, plus the embedding on the first stage and the head
// (final norm, LM head, loss) on the last: fixed and per-layer parts by least squares over the
// stages (fixed 0 when every stage holds as many layers, as neither can then be told apart), the
// extras as what the end stages measured beyond the fit (at least 0). A placement is
// predicted by simulating the job's own lists (the schedule's order does not depend on the
// placement) with those stage costs and the measured non-compute actions and transfer time.
// The search moves one layer at a time between any two ranks while the predicted step time
// drops, from the running placement and from the even one (every rank at least one layer per
// chunk, the counts summing to model.layers), and keeps the fastest.
#ifndef PIPECOORD_JOBPLAN_REBALANCE_H_
#define PIPECOORD_JOBPLAN_REBALANCE_H_

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "jobplan/calibration.h"
#include "proto/job.pb.h"

namespace pipecoord::jobplan {

// What the model predicts for one placement (layers per rank).
struct PlacementPrediction {
  double step_s = 0;            // calibrated: stage costs, non-compute actions, transfers
  double imbalance_idle_s = 0;  // summed over pipeline ranks: idle(stages) - idle(equal)
};

// The model of per-layer costs fitted to the job's measured stages.
class LayerCostModel {
 public:
  LayerCostModel(const v1::JobSpec& spec, const v1::Plan& plan, const CalibratedJob& job);
  // INVALID_ARGUMENT naming spec.stageLayers when the placement does not fit the schedule.
  Result<PlacementPrediction> Predict(const std::vector<int>& rank_layers) const;
  // Predict's step_s alone: one simulation instead of three (the search compares only this).
  Result<double> StepSeconds(const std::vector<int>& rank_layers) const;
  // "per layer F 1.200 ms, ...; per stage +0.100 ms, embedding +0.100 ms, head +0.800 ms (all ops)"
  std::string Describe() const;

 private:
  // The stage costs the model gives `rank_layers`.
  Result<MeasuredCosts> CostsFor(const std::vector<int>& rank_layers) const;

  const v1::JobSpec& spec_;
  const CalibratedJob& job_;
  std::vector<int> stage_to_rank_;
  // Per op slot (F, B, W, BW): per-layer, embedding and head cost, s.
  double fixed_[4] = {}, layer_[4] = {}, embedding_[4] = {}, head_[4] = {};
  bool present_[4] = {};
};

// The running placement's layers per rank (spec.stageLayers or the plan's shards summed).
std::vector<int> RankLayers(const v1::JobSpec& spec, const v1::Plan& plan);

// The fastest placement found, when it beats the running one by at least `min_gain` (0.02:
// 2 %); nullopt otherwise.
Result<std::optional<v1::RebalanceProposal>> ProposeRebalance(const v1::JobSpec& spec, const v1::Plan& plan,
                                                              const CalibratedJob& job, double min_gain = 0.02);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_REBALANCE_H_
