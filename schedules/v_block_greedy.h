// The published way of turning a V building block into a schedule (Qi et al. 2024, "Pipeline
// Parallelism with Controllable Memory", arXiv 2405.15362, as their code builds V-Half and V-Min
// in sail-sg/zero-bubble-pipeline-parallelism; read, not copied), kept beside ours (v_block.h) as
// one more candidate because with uneven costs it can be the faster order.
//
// In slots of one pass, it repeats the block, gives each B a W in the first free slot, and moves
// passes greedily into earlier free slots, in slot order, in two rounds: the warm-up (before rank
// 0's first B on chunk 0) and the cool-down (after rank 0's last F) with the W's in place, then
// the cool-down again with the W's taken out. The steady state is never touched. A move is kept
// only while the rank's activations stay within the block's highest peak, counted their way: an F
// holds one chunk until its W frees it all (without placed W's: a B's W is assumed to run in the
// rank's next free slot). After each round the slots are compacted (each pass as early as its
// inputs and its rank allow, at unit cost). Last, the W's are placed once more, a chunk-1 W
// before any owed chunk-0 W, and each rank runs its passes in slot order.
//
// Their memory rule is not ours (simulator.h: B frees 1 - w_share, W the rest, per rank), so the
// caller checks the result's peaks against the limit it promises.
#ifndef PIPECOORD_SCHEDULES_V_BLOCK_GREEDY_H_
#define PIPECOORD_SCHEDULES_V_BLOCK_GREEDY_H_

#include <vector>

#include "common/status.h"
#include "schedules/action.h"
#include "schedules/v_block.h"

namespace pipecoord::schedules {

// Each rank's compute order (F, B, W on the V placement's stages) for `microbatches`
// micro-batches built from `block` (CheckVBlock must pass). Internal when the block's passes
// cannot keep their order (not expected for a checked block).
Result<std::vector<std::vector<Action>>> GreedyVBlockOrders(int microbatches, const std::vector<VBlockRow>& block);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_V_BLOCK_GREEDY_H_
