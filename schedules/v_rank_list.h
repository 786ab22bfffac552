// VRankList: writes one rank's compute list for a V placement (two chunks per rank), so the
// hand-written V schedules (zbv, dualpipev) read as "forward on chunk 0, backward on chunk 1"
// and never compute stage or micro-batch numbers themselves.
//
// Chunk 0 is the rank's stage on the way down the V (stage r), chunk 1 its stage on the way
// back (stage 2p-1-r). Each chunk runs its micro-batches in order 0, 1, 2, ... for F, for B and
// for W; a B leaves its W owed until Weight() or OldestWeight() runs it.
#ifndef PIPECOORD_SCHEDULES_V_RANK_LIST_H_
#define PIPECOORD_SCHEDULES_V_RANK_LIST_H_

#include <deque>
#include <vector>

#include "schedules/action.h"

namespace pipecoord::schedules {

class VRankList {
 public:
  VRankList(int pp, int rank);

  int Stage(int chunk) const { return stage_[chunk]; }
  int Forwards(int chunk) const { return next_f_[chunk]; }
  int Backwards(int chunk) const { return next_b_[chunk]; }
  int Owed(int chunk) const { return next_b_[chunk] - next_w_[chunk]; }  // W's not run yet

  void Forward(int chunk);
  // B of the chunk's next micro-batch; its W stays owed.
  void Backward(int chunk);
  // B immediately followed by its W (a full backward, kept split so W is its own action).
  void FullBackward(int chunk);
  // The chunk's oldest owed W.
  void Weight(int chunk);
  // The oldest owed W of either chunk (first owed, first run).
  void OldestWeight();

  // The list, without the actions of micro-batches >= microbatches (generators that pad the
  // micro-batch count to fill their pattern drop the padding here; what is left stays valid,
  // since dropping whole micro-batches removes no input any kept action needs).
  std::vector<Action> Take(int microbatches) &&;

 private:
  int stage_[2];
  int next_f_[2] = {0, 0};
  int next_b_[2] = {0, 0};
  int next_w_[2] = {0, 0};
  std::deque<int> owed_;  // chunks of owed W's, oldest first
  std::vector<Action> list_;
};

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_V_RANK_LIST_H_
