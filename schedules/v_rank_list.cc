#include "schedules/v_rank_list.h"

#include <algorithm>

namespace pipecoord::schedules {

VRankList::VRankList(int pp, int rank) : stage_{rank, 2 * pp - 1 - rank} {}

void VRankList::Forward(int chunk) { list_.push_back({Op::kF, stage_[chunk], next_f_[chunk]++}); }

void VRankList::Backward(int chunk) {
  list_.push_back({Op::kB, stage_[chunk], next_b_[chunk]++});
  owed_.push_back(chunk);
}

void VRankList::FullBackward(int chunk) {
  Backward(chunk);
  Weight(chunk);
}

// A misuse (no W owed) adds nothing; the validator then reports the missing W by name.
void VRankList::Weight(int chunk) {
  auto it = std::find(owed_.begin(), owed_.end(), chunk);
  if (it == owed_.end()) return;
  owed_.erase(it);
  list_.push_back({Op::kW, stage_[chunk], next_w_[chunk]++});
}

void VRankList::OldestWeight() {
  if (!owed_.empty()) Weight(owed_.front());
}

std::vector<Action> VRankList::Take(int microbatches) && {
  std::erase_if(list_, [&](const Action& a) { return a.mb >= microbatches; });
  return std::move(list_);
}

}  // namespace pipecoord::schedules
