#include "jobplan/assignment.h"

#include <algorithm>

#include "jobplan/layout.h"

namespace pipecoord::jobplan {
namespace {

// The ranks `global` exchanges data with (RankLayout::DataPlanePeers) and itself, ascending.
std::vector<int> PeersAndSelf(const RankLayout& layout, int global) {
  std::vector<int> peers = layout.DataPlanePeers(global);
  peers.insert(std::upper_bound(peers.begin(), peers.end(), global), global);
  return peers;
}

}  // namespace

v1::Assignment BuildAssignment(const std::string& job_id, const v1::JobSpec& spec, const v1::Plan& plan,
                               int global, const std::vector<std::string>& endpoints, uint64_t session) {
  const RankCoords c = LayoutOf(spec).Coords(global);
  const int rank = c.pp;
  v1::Assignment a;
  a.set_job_id(job_id);
  a.set_rank(rank);
  a.set_dp_rank(c.dp);
  a.set_tp_rank(c.tp);
  *a.mutable_spec() = spec;
  *a.mutable_jobs() = plan.ranks(rank);
  for (const v1::StageShard& s : plan.shards()) {
    if (plan.stage_to_rank(s.stage()) == rank) *a.add_shards() = s;
  }
  // Only the ranks it exchanges data with, and itself.
  for (int q : PeersAndSelf(LayoutOf(spec), global)) {
    if (q < 0 || q >= static_cast<int>(endpoints.size())) continue;
    v1::Peer* p = a.add_peers();
    p->set_global_rank(q);
    p->set_data_endpoint(endpoints[q]);
  }
  a.set_session(session);
  *a.mutable_stage_to_rank() = plan.stage_to_rank();
  return a;
}

v1::Recovery RecoveryFor(const v1::Recovery& recovery, const RankLayout& layout, int global) {
  v1::Recovery mine = recovery;
  const std::vector<int> peers = PeersAndSelf(layout, global);
  mine.clear_peers();
  for (const v1::Peer& p : recovery.peers()) {
    if (std::binary_search(peers.begin(), peers.end(), p.global_rank())) *mine.add_peers() = p;
  }
  return mine;
}

}  // namespace pipecoord::jobplan
