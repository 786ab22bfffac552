// V schedules built from a repeating building block (Qi et al. 2024, "Pipeline Parallelism with
// Controllable Memory", arXiv 2405.15362), shared by v-half and v-min.
//
// Time is cut in slots of one chunk pass (F, B or W of one micro-batch on one chunk: equal when
// f = b = w). The block says, for each rank, in which slot one micro-batch's four passes run:
// F on chunk 0 (down the V), F on chunk 1 (back up), B on chunk 1, B on chunk 0. Micro-batch i
// runs the block shifted by 6i slots, the six slots a micro-batch takes on a rank, so the block
// must put a rank's four passes in distinct slots modulo 6; the other two slots of each period
// take the W's. The paper shows that a rank's peak activations follow from how long the block
// keeps its activations (the block's lifespan), which is how v-half and v-min cap memory.
//
// Building a schedule, as in the paper: repeat the block; give each B's W the first free slot
// after it (oldest B first); squeeze (move each pass into the earliest free slot its inputs
// allow, a forward only where it does not raise the rank's peak); and reorder once more moving
// only B's, with the W's placed again afterwards. The published construction of the same block
// (v_block_greedy.h) is one more candidate. The candidate that the cost model runs fastest,
// among those whose peaks stay at the block's, is returned (compute order only).
#ifndef PIPECOORD_SCHEDULES_V_BLOCK_H_
#define PIPECOORD_SCHEDULES_V_BLOCK_H_

#include <string>
#include <vector>

#include "common/status.h"
#include "schedules/generator.h"

namespace pipecoord::schedules {

// One rank's row of a building block: the slot of each of one micro-batch's passes.
struct VBlockRow {
  int f_down;  // F on chunk 0 (stage r)
  int f_up;    // F on chunk 1 (stage 2p-1-r)
  int b_up;    // B on chunk 1
  int b_down;  // B on chunk 0
};

// Slots one micro-batch takes on one rank: F, B and W on each of its two chunks.
inline constexpr int kVBlockPeriod = 6;

// Checks the block (one row per rank, passes after their inputs, distinct slots modulo 6);
// a broken block is an Internal error naming the rank and the rule.
Status CheckVBlock(const std::vector<VBlockRow>& block);

// The schedule built from `block` for spec.pp ranks and spec.microbatches micro-batches.
Result<Schedule> ScheduleFromVBlock(const ScheduleSpec& spec, const std::string& name,
                                    const std::vector<VBlockRow>& block);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_V_BLOCK_H_
