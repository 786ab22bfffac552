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
  // PyTorch's non-compute actions, in the same units (one rank's whole share; a stage takes its
  // fraction, as F does): each holds its rank that long, and counts as idle in every bubble
  // figure (it runs no layer). 0: free, the default.
  double unshard = 0.0;      // UNSHARD: gathering a stage's FSDP-sharded parameters
  double reshard = 0.0;      // RESHARD: freeing them again
  double reduce_grad = 0.0;  // REDUCE_GRAD: reducing a stage's gradients across replicas
  // OVERLAP_F_B: how much of the shorter half hides under the longer one, 0..1. The slot lasts
  // F + B - overlap x min(F, B): 0 (the default) is F + B, PyTorch's runtime running the two
  // sub-actions one after the other; 1 is max(F, B), a perfect overlap as DualPipe aims for.
  double overlap = 0.0;
};

// Checks a cost model against a schedule's shape; errors name the field and the rule.
Status ValidateCostModel(const CostModel& costs, int pp, int num_stages);

// Per virtual stage costs and activation sizes, resolved once for a given schedule.
struct StageCosts {
  std::vector<double> f, b, w;     // time of one micro-batch's F, B, W on that stage
  std::vector<double> activation;  // activation units one F on that stage adds
  std::vector<double> unshard, reshard, reduce_grad;
  double comm = 0.0;
  double w_share = 0.5;
  double overlap = 0.0;

  // 0 for communication, probes, OPT and OVERLAP_F_B (the slot it opens: SlotDuration).
  double Duration(const Action& a) const;
  // An OVERLAP_F_B slot whose forward half takes `f` and backward half `b`.
  double SlotDuration(double f, double b) const;
};

StageCosts ResolveCosts(const CostModel& costs, const Schedule& schedule);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_COST_MODEL_H_
