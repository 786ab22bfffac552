// The interleaved 1F1B order of one rank, shared by the interleaved generator and by schedules
// built on it (docs/schedules.md explains the grouping).
#ifndef PIPECOORD_SCHEDULES_INTERLEAVED_ORDER_H_
#define PIPECOORD_SCHEDULES_INTERLEAVED_ORDER_H_

#include <vector>

#include "schedules/action.h"

namespace pipecoord::schedules {

// Micro-batch group sizes: floor(m/p) groups sharing m as evenly as possible (larger first),
// each at least p; a single group of m when m < p.
std::vector<int> InterleavedGroups(int pp, int microbatches);

// Rank `rank`'s order over chunks 0..vpp-1 (stage c*pp + rank) for the given groups, with
// `backward` (kBW) as the backward op.
std::vector<Action> InterleavedRankOrder(int pp, int vpp, int rank, const std::vector<int>& groups,
                                         Op backward);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_INTERLEAVED_ORDER_H_
