// CostModel: how long each action takes and how much activation memory it holds.
//
// Units: a cost is the time of one micro-batch through one rank's whole share of the model;
// memory is one micro-batch's activations for one rank's whole share. A virtual stage is a
// fraction of its rank's share (1/v by default; uneven layer placements give other fractions),
// and its F/B/W costs and activations scale with that fraction.
#ifndef PIPECOORD_SCHEDULES_COST_MODEL_H_
#define PIPECOORD_SCHEDULES_COST_MODEL_H_

#include <vector>

#include "common/status.h"
#include "schedules/schedule.h"

namespace pipecoord::schedules {

struct CostModel {
  double f = 1.0;     // forward
  double b = 1.0;     // input-gradient backward
  double w = 1.0;     // weight-gradient backward (BW costs b + w)
  double comm = 0.0;  // one point-to-point transfer between ranks
  // Optional, one per virtual stage: the stage's share of its rank's work. Empty: 1/v each.
  std::vector<double> stage_fraction;
  // Optional, one per rank: multiplies every compute cost on that rank (a straggler: 1.5).
  std::vector<double> rank_slowdown;
  // Share of a stage's activations that B keeps alive until W (the rest B frees).
  double w_share = 0.5;
};

// Checks a cost model against a schedule's shape; errors name the field and the rule.
Status ValidateCostModel(const CostModel& costs, int pp, int num_stages);

// Per virtual stage costs and activation sizes, resolved once for a given schedule.
struct StageCosts {
  std::vector<double> f, b, w;     // time of one micro-batch's F, B, W on that stage
  std::vector<double> activation;  // activation units one F on that stage adds
  double comm = 0.0;
  double w_share = 0.5;

  double Duration(const Action& a) const;  // 0 for communication, probes and OPT
};

StageCosts ResolveCosts(const CostModel& costs, const Schedule& schedule);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_COST_MODEL_H_
