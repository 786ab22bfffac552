#include "schedules/zb_list_scheduler.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <set>
#include <string>
#include <tuple>

namespace pipecoord::schedules {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// When a candidate F or B can start: exactly (its inputs are scheduled) or at the earliest
// (a neighbour has yet to schedule the producer; it cannot end before the neighbour's clock
// plus the producer's duration plus comm).
struct Candidate {
  bool present = false;
  bool known = false;
  double time = kInf;
};

class ListScheduler {
 public:
  ListScheduler(const StageCosts& c, int pp, int m, double limit, const ListPolicy& policy)
      : c_(c), p_(pp), m_(m), limit_(limit), policy_(policy), ranks_(pp),
        f_end_(static_cast<size_t>(pp) * m, -1.0), b_end_(static_cast<size_t>(pp) * m, -1.0) {
    for (int r = 0; r < p_; ++r) {
      int cap = r < static_cast<int>(policy.max_in_flight.size()) ? policy.max_in_flight[r] : m;
      ranks_[r].cap = std::clamp(cap, 1, std::max(1, m));
      ranks_[r].list.reserve(3 * static_cast<size_t>(m));
    }
  }

  Result<ListSchedule> Run() {
    int unfinished = p_;
    for (int r = 0; r < p_; ++r) Push(r);
    while (unfinished > 0) {
      int acted = -1;
      if (!heap_.empty()) {
        auto [neg_clock, r, version] = heap_.top();
        heap_.pop();
        (void)neg_clock;
        if (version != ranks_[r].version) continue;  // stale entry
        const Step step = Decide(r, /*force=*/false);
        if (step == Step::kActed) {
          acted = r;
        } else {
          ranks_[r].blocked = true;
          if (step == Step::kWaitCanForce) waiting_.insert({ranks_[r].clock, -r});
        }
      } else {
        // Every unfinished rank waits to learn a neighbour's timing (two neighbours can wait on
        // each other): the earliest one that knows enough to act goes ahead on what it knows.
        if (waiting_.empty()) return Internal("zb-auto list scheduler: no rank can act (a bug)");
        acted = -waiting_.begin()->second;
        Unblock(acted);
        if (Decide(acted, /*force=*/true) != Step::kActed) {
          return Internal("zb-auto list scheduler: a forced rank did not act (a bug)");
        }
      }
      if (acted < 0) continue;
      if (Finished(acted)) {
        --unfinished;
        ++ranks_[acted].version;
      } else {
        Push(acted);
      }
      for (int q : {acted - 1, acted + 1}) {  // they may have been waiting on this rank
        if (q >= 0 && q < p_ && ranks_[q].blocked) {
          Unblock(q);
          Push(q);
        }
      }
    }
    ListSchedule out;
    out.ranks.resize(p_);
    for (int r = 0; r < p_; ++r) out.ranks[r] = std::move(ranks_[r].list);
    out.makespan = makespan_;
    return out;
  }

 private:
  struct RankState {
    double clock = 0;  // when the rank is free
    double live = 0;   // activations held, summed in list order as PeakActivations does
    int nf = 0, nb = 0, nw = 0;  // next micro-batch of each kind (each kind runs in order)
    int cap = 1;
    bool last_was_b = false;
    bool blocked = false;
    int version = 0;
    std::vector<Action> list;
  };

  // What a rank's turn came to: it ran an action, or it waits for a neighbour (and, when every
  // rank waits, could go ahead on what it knows, or could not).
  enum class Step { kActed, kWaitCanForce, kWaitCannot };

  bool Finished(int r) const { return ranks_[r].nw == m_; }

  void Unblock(int r) {
    ranks_[r].blocked = false;
    waiting_.erase({ranks_[r].clock, -r});
  }

  void Push(int r) {
    ++ranks_[r].version;
    // Earliest clock first; on a tie the later rank, whose B's the earlier ones wait for.
    heap_.push({-ranks_[r].clock, r, ranks_[r].version});
  }

  double& FEnd(int r, int k) { return f_end_[static_cast<size_t>(r) * m_ + k]; }
  double& BEnd(int r, int k) { return b_end_[static_cast<size_t>(r) * m_ + k]; }

  Candidate NextB(int r) {
    const RankState& s = ranks_[r];
    Candidate cand;
    if (s.nb >= s.nf) return cand;
    cand.present = true;
    const int k = s.nb;
    if (r == p_ - 1) {
      cand = {true, true, FEnd(r, k)};
    } else if (BEnd(r + 1, k) >= 0) {
      cand = {true, true, std::max(FEnd(r, k), BEnd(r + 1, k) + c_.comm)};
    } else {
      cand.time = ranks_[r + 1].clock + c_.b[r + 1] + c_.comm;
    }
    return cand;
  }

  // Forwards wait for their warm-up slot and for memory (counting the W's the rank can run
  // first to make room).
  Candidate NextF(int r) {
    const RankState& s = ranks_[r];
    Candidate cand;
    if (s.nf >= m_ || s.nf - s.nb >= s.cap) return cand;
    const double act = c_.activation[r];
    const double after_w = s.live - (s.nb - s.nw) * act * c_.w_share;
    if (!(after_w + act <= limit_)) return cand;
    cand.present = true;
    const int k = s.nf;
    if (r == 0) {
      cand = {true, true, 0.0};
    } else if (FEnd(r - 1, k) >= 0) {
      cand = {true, true, FEnd(r - 1, k) + c_.comm};
    } else {
      cand.time = ranks_[r - 1].clock + c_.f[r - 1] + c_.comm;
    }
    return cand;
  }

  // One turn of rank r: runs an action, or waits until a neighbour has scheduled more.
  // `force`: act on what is known even if an unknown input might come sooner.
  Step Decide(int r, bool force) {
    RankState& s = ranks_[r];
    const double now = s.clock;
    const Candidate b = NextB(r);
    const Candidate f = NextF(r);
    const bool has_w = s.nw < s.nb;
    const bool f_fits_now = s.live + c_.activation[r] <= limit_;

    const bool b_ready = b.known && b.time <= now;
    const bool f_ready = f.known && f.time <= now;
    if (b_ready && !(policy_.alternate && f_ready && s.last_was_b)) {
      Put(r, Op::kB, now);
      return Step::kActed;
    }
    if (f_ready) {
      Put(r, f_fits_now ? Op::kF : Op::kW, now);  // NextF counted on W's freeing room
      return Step::kActed;
    }

    // Nothing can start now. The first known start, and the earliest an unknown one could be.
    double known = kInf, unknown = kInf;
    Op known_op = Op::kB;
    for (auto [cand, op] : {std::pair{b, Op::kB}, std::pair{f, Op::kF}}) {
      if (!cand.present) continue;
      if (cand.known && cand.time < known) {
        known = cand.time;
        known_op = op;
      } else if (!cand.known) {
        unknown = std::min(unknown, cand.time);
      }
    }
    const double earliest = std::min(known, unknown);
    if (has_w) {
      const double w = c_.w[r];
      if (now + w <= earliest) {  // fills the gap without delaying anything
        Put(r, Op::kW, now);
        return Step::kActed;
      }
      if (known <= unknown) {
        if (known - now >= policy_.fill_ratio * w || (known_op == Op::kF && !f_fits_now)) {
          Put(r, Op::kW, now);
        } else {
          Put(r, known_op, known);
        }
        return Step::kActed;
      }
      if (force) {
        Put(r, Op::kW, now);
        return Step::kActed;
      }
      return Step::kWaitCanForce;
    }
    if (known < kInf && (known <= unknown || force)) {
      Put(r, known_op, known);  // with no W owed, NextF's room is there now
      return Step::kActed;
    }
    return known < kInf ? Step::kWaitCanForce : Step::kWaitCannot;
  }

  void Put(int r, Op op, double start) {
    RankState& s = ranks_[r];
    const double act = c_.activation[r];
    int mb = 0;
    double end = start;
    switch (op) {
      case Op::kF:
        mb = s.nf++;
        end = start + c_.f[r];
        FEnd(r, mb) = end;
        s.live += act;
        s.last_was_b = false;
        break;
      case Op::kB:
        mb = s.nb++;
        end = start + c_.b[r];
        BEnd(r, mb) = end;
        s.live -= act * (1 - c_.w_share);
        s.last_was_b = true;
        break;
      default:
        mb = s.nw++;
        end = start + c_.w[r];
        s.live -= act * c_.w_share;
        break;
    }
    s.list.push_back({op, r, mb});
    s.clock = end;
    makespan_ = std::max(makespan_, end);
  }

  const StageCosts& c_;
  const int p_, m_;
  const double limit_;
  const ListPolicy& policy_;
  std::vector<RankState> ranks_;
  std::vector<double> f_end_, b_end_;  // -1: not scheduled yet
  double makespan_ = 0;
  // (-clock, rank, version): a max-heap on -clock is a min-heap on clock, later rank first.
  std::priority_queue<std::tuple<double, int, int>> heap_;
  // Blocked ranks that could act if forced, earliest clock first, later rank first on a tie.
  std::set<std::pair<double, int>> waiting_;
};

}  // namespace

Result<ListSchedule> RunListScheduler(const StageCosts& costs, int pp, int microbatches,
                                      double mem_limit, const ListPolicy& policy) {
  for (int r = 0; r < pp; ++r) {
    if (!(costs.activation[r] <= mem_limit)) {
      return InvalidArgument("mem-limit: stage " + std::to_string(r) +
                             " needs more than the limit for one micro-batch");
    }
  }
  return ListScheduler(costs, pp, microbatches, mem_limit, policy).Run();
}

}  // namespace pipecoord::schedules
