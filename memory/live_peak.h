// Peak live activations of each rank of a schedule, in bytes.
//
// Walks each rank's compute list in order, as schedules::PeakActivations does, but with each
// virtual stage's own byte counts, exactly: F adds the stage's stored bytes for that
// micro-batch; B (input-gradient backward) leaves only what W still needs (which may be more
// than F stored, under full recompute); W frees that; BW frees everything.
#ifndef PIPECOORD_MEMORY_LIVE_PEAK_H_
#define PIPECOORD_MEMORY_LIVE_PEAK_H_

#include <cstdint>
#include <vector>

#include "schedules/schedule.h"

namespace pipecoord::memory {

// One virtual stage, one micro-batch.
struct StageBytes {
  int64_t stored = 0;      // added by F, held until B (or BW)
  int64_t kept_for_w = 0;  // held from B until W
};

struct LivePeak {
  int64_t bytes = 0;            // the most bytes live at once
  int live_microbatches = 0;    // (stage, micro-batch) pairs with something live at that moment
  int action_index = -1;        // index in the rank's list of the action after which it happened
};

// `stages` has one entry per virtual stage of `schedule`.
std::vector<LivePeak> PeakLiveActivations(const schedules::Schedule& schedule,
                                          const std::vector<StageBytes>& stages);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_LIVE_PEAK_H_
