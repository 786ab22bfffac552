// ScheduleCache: what the planner needs from one schedule shape, computed once.
//
// Many candidates share a (schedule, pp, vpp, microbatches): the compute order, its bubble rate
// under unit costs (F = B = W = 1 per rank share) and each rank's live-activation profile do
// not depend on the model, the micro-batch size, tensor parallelism or recompute. A cache is
// owned by its caller (no global state): one search, or a coordinator that keeps the shapes its
// "auto" searches built for the next one (a dry run, then the submission).
//
// Thread-safe when enabled (searches may share one; a profile is built outside the lock, and two
// threads missing the same shape both build it, one copy kept). Profiles are never evicted, so
// a returned reference stays valid for the cache's life. Disabled: one thread at a time.
#ifndef PIPECOORD_PLANNER_SCHEDULE_CACHE_H_
#define PIPECOORD_PLANNER_SCHEDULE_CACHE_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "common/status.h"

namespace pipecoord::planner {

// At one moment of a rank's list: `stored` (stage, micro-batch) pairs between F and B (or BW),
// `pending_w` pairs between B and W. A rank's profile keeps only the moments no other moment
// dominates, so the peak for any byte sizes is the max of stored x S + pending_w x W over them.
struct LiveCounts {
  int stored = 0;
  int pending_w = 0;
  friend bool operator==(const LiveCounts&, const LiveCounts&) = default;
};

struct ScheduleProfile {
  Status status;  // not OK: the generator refused this shape (the reason to prune)
  int pp = 0, vpp = 0, microbatches = 0;
  // The micro-batch count the schedule was built and simulated at: `microbatches`, or fewer when
  // the profile was extrapolated from its steady state (ProfileSchedule).
  int built_at = 0;
  double bubble_rate = 0;  // from schedules::Simulate with unit costs
  std::vector<int> stage_to_rank;
  std::vector<std::vector<LiveCounts>> rank_profile;  // per rank, the undominated moments
};

// The least bubble rate any schedule of `pp` ranks with `vpp` chunks each can have under the
// profiles' unit costs (a rank's F, B and W of one micro-batch take 1 each over its chunks, so one
// chunk's 1 / vpp), from two bounds on the makespan:
// - the last rank can start nothing before micro-batch 0's forward has crossed the pp - 1 chunks
//   ahead of its first, (pp - 1) / vpp, and then has 3 m of work: 3 m + (pp - 1) / vpp. Holds for
//   every placement the registry has (flat, looped, V: the last rank's first chunk is stage pp - 1);
// - stage 0's first backward can start only once a micro-batch's forward has crossed all pp vpp
//   chunks (pp) and its backward the pp vpp - 1 chunks after stage 0 ((pp vpp - 1) / vpp); every
//   micro-batch's stage-0 B and W (2 m / vpp) run after it, on the one rank holding stage 0:
//   2 pp + (2 m - 1) / vpp, whatever the placement. It binds when micro-batches are few
//   (m < pp flat, m < 3 pp / 4 with two chunks a rank: the pipeline never fills).
// The planner's bound for the searching schedules.
double MinBubbleRate(int pp, int vpp, int microbatches);

// Builds the profile of one shape (no caching): GenerateComputeOrder, Simulate, one walk.
// Many micro-batches (m over 6 to 8 pp vpp): the schedule is built at two smaller counts, m1 in
// [2 pp vpp, 4 pp vpp) and m2 = m1 + 2 pp vpp, that keep m's residue modulo 2 pp vpp (so every
// family's shape rule answers as for m), and when
// its steady state shows (the same rank profiles, the same idle time) the profile is m2's with
// the idle time kept and the work grown to m; otherwise it is built at m. A schedule whose warm-
// up and cool-down do not change with m gives exactly its profile at m (the tests check every
// family against the full build).
ScheduleProfile ProfileSchedule(const std::string& schedule, int pp, int vpp, int microbatches);
// The full build at `microbatches`, never extrapolated (the tests' reference).
ScheduleProfile ProfileScheduleAt(const std::string& schedule, int pp, int vpp, int microbatches);

class ScheduleCache {
 public:
  // enabled = false recomputes every time (the benchmark's baseline).
  explicit ScheduleCache(bool enabled = true) : enabled_(enabled) {}

  // The profile for the shape; the reference stays valid until the next call when disabled.
  const ScheduleProfile& Get(const std::string& schedule, int pp, int vpp, int microbatches);

  using Key = std::tuple<std::string, int, int, int>;  // schedule, pp, vpp, microbatches
  // Computes the profiles of `keys` not cached yet on `threads` threads (generators and the
  // simulator are pure functions), so later Gets hit. No-op when disabled.
  void Prefetch(const std::vector<Key>& keys, int threads);

  int64_t hits() const;
  int64_t misses() const;
  size_t size() const;  // shapes held

 private:
  bool enabled_;
  mutable std::mutex mu_;
  std::map<Key, ScheduleProfile> profiles_;  // guarded by mu_; nodes never erased
  ScheduleProfile scratch_;
  int64_t hits_ = 0, misses_ = 0;  // guarded by mu_
};

}  // namespace pipecoord::planner

#endif  // PIPECOORD_PLANNER_SCHEDULE_CACHE_H_
