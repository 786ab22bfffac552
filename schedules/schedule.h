// Schedule: for each rank, the ordered list of actions it runs in one training step.
#ifndef PIPECOORD_SCHEDULES_SCHEDULE_H_
#define PIPECOORD_SCHEDULES_SCHEDULE_H_

#include <string>
#include <vector>

#include "schedules/action.h"

namespace pipecoord::schedules {

struct Schedule {
  std::string name;         // the generator that made it ("1f1b", "csv", ...)
  int pp = 0;               // ranks
  int vpp = 1;              // virtual stages (chunks) per rank
  int microbatches = 0;
  std::vector<int> stage_to_rank;          // size pp * vpp, virtual stage -> rank
  std::vector<std::vector<Action>> ranks;  // size pp

  int num_stages() const { return static_cast<int>(stage_to_rank.size()); }
  // True once the communication pass (or an import) has added SEND/RECV actions.
  bool HasCommunication() const;
  size_t NumActions() const;
};

// Interleaved placement: virtual stage k on rank k mod pp.
std::vector<int> LoopedPlacement(int pp, int vpp);
// V placement (two chunks per rank): stages 0..p-1 on ranks 0..p-1, then p..2p-1 on p-1..0.
std::vector<int> VPlacement(int pp);

// An empty schedule with the given shape and placement, ready for a generator to fill.
Schedule MakeSchedule(std::string name, int pp, int vpp, int microbatches,
                      std::vector<int> stage_to_rank);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_SCHEDULE_H_
