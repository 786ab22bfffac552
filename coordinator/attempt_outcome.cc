#include "coordinator/attempt_outcome.h"

#include <algorithm>

namespace pipecoord::coordinator {

bool AttemptOutcome::Succeeded(int g) {
  done_ok_[g] = true;
  return std::all_of(done_ok_.begin(), done_ok_.end(), [](bool b) { return b; });
}

bool AttemptOutcome::Failed(int g, const std::string& cause, const std::vector<int>& unreachable, Clock::time_point deadline) {
  failed_[g] = true;
  const int world = static_cast<int>(failed_.size());
  // A broken link (or a peer that never connected) is a symptom; the peer's own report or lease
  // loss is the root cause. Blame, among the peers this rank lost, one that has not failed itself.
  int suspect = -1;
  for (int p : unreachable) {
    if (p >= 0 && p < world && p != g && (suspect < 0 || !failed_[p])) suspect = p;
  }
  if (!suspicion_) {
    if (suspect < 0) return true;  // its own failure: the root
    suspicion_ = Suspicion{cause, suspect, deadline};
    return false;
  }
  if (suspicion_->suspect_global != g) return false;  // another symptom: the suspect's word is awaited
  // The suspect speaks: its own failure is the root; if it lost a peer too, follow the chain,
  // unless that peer already spoke.
  if (suspect < 0 || failed_[suspect]) return true;
  suspicion_ = Suspicion{cause, suspect, deadline};
  return false;
}

const AttemptOutcome::Suspicion* AttemptOutcome::Overdue(Clock::time_point now) const {
  return suspicion_ && suspicion_->deadline <= now ? &*suspicion_ : nullptr;
}

}  // namespace pipecoord::coordinator
