#include "common/rank_layout.h"

#include <algorithm>
#include <limits>
#include <set>

namespace pipecoord {

Result<RankLayout> RankLayout::Create(int pp, int dp, int tp) {
  for (auto [name, v] : {std::pair{"pp", pp}, {"dp", dp}, {"tp", tp}}) {
    if (v < 1) return InvalidArgument(std::string(name) + " must be >= 1, got " + std::to_string(v));
  }
  if (static_cast<long long>(pp) * dp * tp > std::numeric_limits<int>::max()) {
    return InvalidArgument("pp x dp x tp = " + std::to_string(static_cast<long long>(pp) * dp * tp) +
                           " ranks does not fit an int");
  }
  return RankLayout(pp, dp, tp);
}

RankLayout RankLayout::OfDegrees(int pp, int dp, int tp) {
  return RankLayout(std::max(1, pp), std::max(1, dp), std::max(1, tp));
}

bool RankLayout::Valid(const RankCoords& c) const {
  return c.pp >= 0 && c.pp < pp_ && c.dp >= 0 && c.dp < dp_ && c.tp >= 0 && c.tp < tp_;
}

RankCoords RankLayout::Coords(int global) const {
  return {PipelineRank(global), DataRank(global), TensorRank(global)};
}

int RankLayout::AtPipelineRank(int global, int pp_rank) const {
  RankCoords c = Coords(global);
  c.pp = pp_rank;
  return Global(c);
}

int RankLayout::AtDataRank(int global, int dp_rank) const {
  RankCoords c = Coords(global);
  c.dp = dp_rank;
  return Global(c);
}

std::vector<int> RankLayout::TensorGroup(int global) const {
  std::vector<int> group(tp_);
  const int first = global - TensorRank(global);
  for (int t = 0; t < tp_; ++t) group[t] = first + t;
  return group;
}

std::vector<int> RankLayout::DataGroup(int global) const {
  std::vector<int> group(dp_);
  for (int d = 0; d < dp_; ++d) group[d] = AtDataRank(global, d);
  return group;
}

std::vector<int> RankLayout::PipelineGroup(int global) const {
  std::vector<int> group(pp_);
  for (int p = 0; p < pp_; ++p) group[p] = AtPipelineRank(global, p);
  return group;
}

std::vector<int> RankLayout::ReplicaGroup(int global) const {
  std::vector<int> group(pp_ * tp_);
  const int first = DataRank(global) * pp_ * tp_;
  for (int i = 0; i < pp_ * tp_; ++i) group[i] = first + i;
  return group;
}

std::vector<int> RankLayout::DataPlanePeers(int global) const {
  std::set<int> peers;
  for (const std::vector<int>& group : {PipelineGroup(global), DataGroup(global), TensorGroup(global)}) {
    peers.insert(group.begin(), group.end());
  }
  const std::vector<int> replica = ReplicaGroup(global);  // its ring's neighbours
  const int n = static_cast<int>(replica.size()), me = global - replica[0];
  peers.insert(replica[(me + 1) % n]);
  peers.insert(replica[(me + n - 1) % n]);
  peers.erase(global);
  return {peers.begin(), peers.end()};
}

std::string RankLayout::Name(int global) const {
  if (global < 0) return "the job";
  const RankCoords c = Coords(global);
  std::string name = "rank " + std::to_string(c.pp) + " (dp " + std::to_string(c.dp);
  if (tp_ > 1) name += ", tp " + std::to_string(c.tp);
  return name + ")";
}

}  // namespace pipecoord
