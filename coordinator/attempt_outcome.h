// AttemptOutcome: how the ranks' results end one attempt of a job. It succeeds once every rank
// reported success. A failure report is either the root cause (the job fails with it at once) or
// a symptom: a rank whose link to a peer broke (or a peer that never connected) suspects that
// peer, and the peer's own report, or its silence past a grace period, is the root. Suspicions
// follow the chain (rank 3 lost 2, 2 lost 1: 1 is the one to hear from). Pure (the caller passes
// the time), no lock: the Coordinator keeps one per job and calls it under its own.
#ifndef PIPECOORD_COORDINATOR_ATTEMPT_OUTCOME_H_
#define PIPECOORD_COORDINATOR_ATTEMPT_OUTCOME_H_

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace pipecoord::coordinator {

class AttemptOutcome {
 public:
  using Clock = std::chrono::steady_clock;

  explicit AttemptOutcome(int world = 0) : done_ok_(world, false), failed_(world, false) {}

  // Global rank `g` finished its part; true once every rank has.
  bool Succeeded(int g);
  // Global rank `g` failed with `cause` (its message, prefixed with its rank and worker), having
  // lost the peers in `unreachable` (global ranks). True when `cause` is the root and the job fails
  // with it now; false while a suspect's own word is awaited (until `deadline`, see Overdue).
  bool Failed(int g, const std::string& cause, const std::vector<int>& unreachable, Clock::time_point deadline);
  // Rank `g` reported a result (success or failure) in this attempt.
  bool reported(int g) const { return done_ok_[g] || failed_[g]; }

  // The peer blamed by the failure awaiting its word, and that failure.
  struct Suspicion {
    std::string cause;  // the reporting rank's
    int suspect_global = -1;
    Clock::time_point deadline;
  };
  // The suspicion whose suspect stayed silent until `now`, past its deadline; null if none.
  const Suspicion* Overdue(Clock::time_point now) const;

 private:
  std::vector<bool> done_ok_;  // by global rank
  std::vector<bool> failed_;   // by global rank
  std::optional<Suspicion> suspicion_;
};

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_ATTEMPT_OUTCOME_H_
