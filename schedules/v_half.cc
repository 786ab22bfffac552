// V-Half (Qi et al. 2024, "Pipeline Parallelism with Controllable Memory", arXiv 2405.15362):
// the V building block that keeps activations about half as long as 1F1B, so about half of its
// peak, with a bubble of about p/2 micro-batch times at f = b = w. In slots of one chunk pass,
// rank i runs one micro-batch's
//   F on chunk 0 at 2i           down the V, one free slot between ranks,
//   F on chunk 1 at 3p-2-i       back up with no gap (the turn rank runs both back to back),
//   B on chunk 1 at 3p-1+g+2i    rank 0 starts the backward right after its F, then down,
//                                one free slot between ranks,
//   B on chunk 0 at 6p-2+g-i     back up with no gap,
// with g = 3 when p is even (else two passes would share a slot modulo 6). The free slots
// between ranks are what the W's and the squeeze use. See v_block.h for how the block becomes
// a schedule. Valid for any p and m >= 1; with m < p the pipeline never fills.
#include "schedules/generator.h"
#include "schedules/v_block.h"

namespace pipecoord::schedules {

Result<Schedule> GenerateVHalf(const ScheduleSpec& spec) {
  const int p = spec.pp;
  const int g = p % 2 == 0 ? 3 : 0;
  std::vector<VBlockRow> block(p);
  for (int i = 0; i < p; ++i) block[i] = {2 * i, 3 * p - 2 - i, 3 * p - 1 + g + 2 * i, 6 * p - 2 + g - i};
  return ScheduleFromVBlock(spec, "v-half", block);
}

}  // namespace pipecoord::schedules
