// V-Min (Qi et al. 2024, "Pipeline Parallelism with Controllable Memory", arXiv 2405.15362):
// the V building block with the shortest lifespan, so about a third of 1F1B's activations,
// paid for with a bubble of about 2p/3 micro-batch times at f = b = w. In slots of one chunk
// pass, rank i runs one micro-batch's
//   F on chunk 0 at i            down the V with no gap between ranks,
//   F on chunk 1 at 2p-1-i       back up with no gap (the turn rank runs both back to back),
//   B on chunk 1 at 2p+g+i       rank 0 starts the backward right after its F, then down,
//   B on chunk 0 at 4p+g-1-i     back up with no gap,
// with g = 2 when p is a multiple of 3 (else two passes would share a slot modulo 6). See
// v_block.h for how the block becomes a schedule. Valid for any p and m >= 1; with m < p the
// pipeline never fills and the bubble dominates.
#include "schedules/generator.h"
#include "schedules/v_block.h"

namespace pipecoord::schedules {

Result<Schedule> GenerateVMin(const ScheduleSpec& spec) {
  const int p = spec.pp;
  const int g = p % 3 == 0 ? 2 : 0;
  std::vector<VBlockRow> block(p);
  for (int i = 0; i < p; ++i) block[i] = {i, 2 * p - 1 - i, 2 * p + g + i, 4 * p + g - 1 - i};
  return ScheduleFromVBlock(spec, "v-min", block);
}

}  // namespace pipecoord::schedules
