// RankLayout: where each of a job's ranks sits in its pipeline x data x tensor grid, as a value.
//
// A job runs pp pipeline stages (ranks of the schedule), dp data-parallel replicas of the
// pipeline and tp tensor-parallel shards of every stage: world = pp x dp x tp workers. Global
// ranks put tp innermost, as Megatron-LM does (parallel_state's RankGenerator), so a
// tensor-parallel group's ranks are neighbours (and are placed on one host), then pp, then dp:
//
//   global = (dp_rank * pp + pp_rank) * tp + tp_rank      (RankGenerator's order "tp-pp-dp")
//
// Megatron's default order puts dp inside pp ("tp-cp-ep-dp-pp"); pipecoord keeps pp inside dp
// because with tp = 1 this is the layout it has always used (dp_rank * pp + rank), so global
// ranks, worker lists and event texts of pp x dp jobs are unchanged. Every place that maps a
// (stage, replica, shard) to a worker goes through this class; python/pipecoord/rank_layout.py
// is its twin (tests/rank_layout checks both give the same answers).
//
// Groups (the members of each collective a rank joins), each in its coordinate's order:
//   TensorGroup   the tp ranks that shard one stage of one replica (TP all-reduce / gather)
//   DataGroup     the dp replicas of one (stage, shard) (gradient reduction, ZeRO)
//   PipelineGroup the pp stages of one (replica, shard) (activations and their gradients)
//
// A plain value: copyable, no I/O, thread-compatible. Methods taking a global rank or a
// coordinate require it to be in range (checked by Contains / Valid; out of range is a bug of
// the caller, as for std::vector::operator[]).
#ifndef PIPECOORD_COMMON_RANK_LAYOUT_H_
#define PIPECOORD_COMMON_RANK_LAYOUT_H_

#include <string>
#include <vector>

#include "common/status.h"

namespace pipecoord {

// One rank's coordinates.
struct RankCoords {
  int pp = 0;  // pipeline rank 0..pp-1 (the schedule's rank)
  int dp = 0;  // data-parallel replica 0..dp-1
  int tp = 0;  // tensor-parallel shard 0..tp-1
  friend bool operator==(const RankCoords&, const RankCoords&) = default;
};

class RankLayout {
 public:
  // INVALID_ARGUMENT naming the degree ("pp", "dp" or "tp") when one is < 1 or the world would
  // not fit an int.
  static Result<RankLayout> Create(int pp, int dp, int tp = 1);
  // A degree of 0 means 1 (JobSpec's convention for dp and tp); the caller has validated them.
  static RankLayout OfDegrees(int pp, int dp, int tp);

  int pp() const { return pp_; }
  int dp() const { return dp_; }
  int tp() const { return tp_; }
  int world() const { return pp_ * dp_ * tp_; }
  bool Contains(int global) const { return global >= 0 && global < world(); }
  bool Valid(const RankCoords& c) const;

  int Global(const RankCoords& c) const { return (c.dp * pp_ + c.pp) * tp_ + c.tp; }
  RankCoords Coords(int global) const;
  int PipelineRank(int global) const { return (global / tp_) % pp_; }
  int DataRank(int global) const { return global / (tp_ * pp_); }
  int TensorRank(int global) const { return global % tp_; }

  // The rank with `global`'s other coordinates and this pipeline rank / replica.
  int AtPipelineRank(int global, int pp_rank) const;
  int AtDataRank(int global, int dp_rank) const;

  std::vector<int> TensorGroup(int global) const;
  std::vector<int> DataGroup(int global) const;
  std::vector<int> PipelineGroup(int global) const;
  // Every rank of its data-parallel replica (its pp x tp ranks), in global order: a contiguous run.
  std::vector<int> ReplicaGroup(int global) const;
  // The ranks `global` exchanges data with, itself excluded, ascending: its pipeline, data and
  // tensor groups, and its two neighbours on the ring over its replica (the ranks of its
  // data-parallel index, in global order: the step commit's and the gradient norm's first ring,
  // worker/daemon/executor.h). What a rank's data plane connects to: at most pp + dp + tp - 1
  // links, where a link to every rank was world - 1 (16,383 per rank, 134 million in a job of
  // 16,384 ranks).
  std::vector<int> DataPlanePeers(int global) const;

  // "rank 1 (dp 0)" when tp = 1 (the texts users already know), else "rank 1 (dp 0, tp 1)".
  // A global rank < 0 (an event about the whole job) is "the job".
  std::string Name(int global) const;

  friend bool operator==(const RankLayout&, const RankLayout&) = default;

 private:
  RankLayout(int pp, int dp, int tp) : pp_(pp), dp_(dp), tp_(tp) {}
  int pp_ = 1, dp_ = 1, tp_ = 1;
};

}  // namespace pipecoord

#endif  // PIPECOORD_COMMON_RANK_LAYOUT_H_
