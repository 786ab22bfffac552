#include "schedules/zb_list_scheduler.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <queue>
#include <set>
#include <string>
#include <tuple>

#include "schedules/schedule.h"
#include "schedules/simulator.h"

namespace pipecoord::schedules {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A forward or backward a rank could run next. Its start is exact when its inputs are
// scheduled (`known`), otherwise a lower bound: a neighbour has yet to schedule the producer,
// which cannot end before the neighbour's clock plus the producer's duration plus comm.
struct Candidate {
  Op op = Op::kF;
  int stage = 0;
  bool known = false;
  double time = kInf;
  bool fits_now = true;  // F only: fits without running W's first
};

class ListScheduler {
 public:
  ListScheduler(const StageCosts& c, const std::vector<int>& owner, int m, const std::vector<double>& limits,
                const ListPolicy& policy)
      : c_(c), owner_(owner), p_(static_cast<int>(limits.size())), m_(m), stages_(static_cast<int>(owner.size())),
        limits_(limits), policy_(policy), ranks_(p_), nf_(stages_, 0), nb_(stages_, 0), nw_(stages_, 0),
        f_end_(static_cast<size_t>(stages_) * m, -1.0), b_end_(static_cast<size_t>(stages_) * m, -1.0) {
    for (int s = 0; s < stages_; ++s) ranks_[owner_[s]].stages.push_back(s);
    for (int r = 0; r < p_; ++r) {
      RankState& st = ranks_[r];
      int cap = r < static_cast<int>(policy.max_in_flight.size()) ? policy.max_in_flight[r] : m;
      st.cap = std::clamp(cap, 1, std::max(1, m));
      st.list.reserve(3 * st.stages.size() * static_cast<size_t>(m));
      multi_stage_ |= st.stages.size() > 1;
      std::set<int> near;
      for (int s : st.stages) {
        for (int t : {s - 1, s + 1}) {
          if (t >= 0 && t < stages_ && owner_[t] != r) near.insert(owner_[t]);
        }
      }
      st.neighbours.assign(near.begin(), near.end());
      // Decide keeps pointers into the buffer: sized once, for a B and an F per stage.
      buffer_.resize(std::max(buffer_.size(), 2 * st.stages.size()));
      if (policy.guide != nullptr && r < static_cast<int>(policy.guide->size())) {
        for (const Action& a : (*policy.guide)[r]) {
          if (a.op != Op::kF && a.op != Op::kB) continue;
          if (a.op == Op::kF && a.stage == st.stages.front()) st.admit_pos.push_back(st.guide.size());
          st.guide.push_back(a);
        }
        st.done.assign(st.guide.size(), 0);
        st.guided = true;
        st.next_f = NextInGuide(st, 0, Op::kF);
        st.next_b = NextInGuide(st, 0, Op::kB);
      }
    }
  }

  // A guide must give each stage's F's and B's in micro-batch order, as this scheduler runs them.
  Status CheckGuide() const {
    for (int r = 0; r < p_; ++r) {
      if (!ranks_[r].guided) continue;
      std::vector<int> f(stages_, 0), b(stages_, 0);
      for (const Action& a : ranks_[r].guide) {
        if (a.stage < 0 || a.stage >= stages_ || owner_[a.stage] != r) {
          return InvalidArgument("guide: rank " + std::to_string(r) + " lists " + ToString(a) + ", not its stage");
        }
        int& next = a.op == Op::kF ? f[a.stage] : b[a.stage];
        if (a.mb != next++) {
          return InvalidArgument("guide: rank " + std::to_string(r) + " runs " + ToString(a) + " out of micro-batch order");
        }
      }
      for (int s : ranks_[r].stages) {
        if (f[s] != m_ || b[s] != m_) {
          return InvalidArgument("guide: rank " + std::to_string(r) + " does not run every F and B of stage " +
                                 std::to_string(s));
        }
      }
    }
    return Status::Ok();
  }

  Result<ListSchedule> Run() {
    PIPECOORD_RETURN_IF_ERROR(CheckGuide());
    int unfinished = 0;
    for (int r = 0; r < p_; ++r) {
      if (Finished(r)) continue;  // a rank with no stages
      ++unfinished;
      Push(r);
    }
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
        if (waiting_.empty()) {
          if (policy_.guide == nullptr && (policy_.reserve || !multi_stage_)) {
            return Internal("list scheduler: no rank can act (a bug)");
          }
          return FailedPrecondition("list scheduler: stuck, every forward left waits for memory");
        }
        acted = -waiting_.begin()->second;
        Unblock(acted);
        if (Decide(acted, /*force=*/true) != Step::kActed) {
          return Internal("list scheduler: a forced rank did not act (a bug)");
        }
      }
      if (acted < 0) continue;
      if (Finished(acted)) {
        --unfinished;
        ++ranks_[acted].version;
      } else {
        Push(acted);
      }
      for (int q : ranks_[acted].neighbours) {  // they may have been waiting on this rank
        if (ranks_[q].blocked) {
          Unblock(q);
          Push(q);
        }
      }
    }
    ListSchedule out;
    out.ranks.resize(p_);
    out.in_flight.resize(p_);
    out.idle.resize(p_);
    for (int r = 0; r < p_; ++r) {
      RankState& st = ranks_[r];
      out.in_flight[r] = st.most_in_flight;
      out.idle[r] = st.idle;
      if (!st.list.empty()) out.span = std::max(out.span, st.clock - st.first_start);
      out.ranks[r] = std::move(st.list);
    }
    out.makespan = makespan_;
    return out;
  }

 private:
  struct RankState {
    std::vector<int> stages;      // ascending: the order a micro-batch visits them
    std::vector<int> neighbours;  // ranks holding a stage next to one of ours
    double clock = 0;             // when the rank is free
    double live = 0;              // activations held, summed in list order as PeakActivations does
    double owed_free = 0;         // what the owed W's would free
    std::deque<int> owed;         // stages of the B's whose W has not run, oldest first
    int done_w = 0;
    int cap = 1;
    bool last_was_b = false;
    bool blocked = false;
    int version = 0;
    double first_start = 0;
    double idle = 0;        // idle time since the first action
    double last_admit = 0;  // when the latest micro-batch entered
    int most_in_flight = 0;
    std::vector<Action> list;
    // With a guide: its F's and B's, and the positions of the next F and the next B to run.
    bool guided = false;
    std::vector<Action> guide;
    size_t next_f = 0, next_b = 0;
    std::vector<char> done;         // per guide entry: run already (F's may run out of order)
    std::vector<size_t> admit_pos;  // guide positions of the first stage's F's, by micro-batch
    bool any_b = false;
  };

  static size_t NextInGuide(const RankState& st, size_t from, Op op) {
    while (from < st.guide.size() && (st.guide[from].op != op || st.done[from])) ++from;
    return from;
  }

  // What a rank's turn came to: it ran an action, or it waits for a neighbour (and, when every
  // rank waits, could go ahead on what it knows, or could not).
  enum class Step { kActed, kWaitCanForce, kWaitCannot };

  bool Finished(int r) const { return ranks_[r].done_w == m_ * static_cast<int>(ranks_[r].stages.size()); }

  void Unblock(int r) {
    ranks_[r].blocked = false;
    waiting_.erase({ranks_[r].clock, -r});
  }

  void Push(int r) {
    ++ranks_[r].version;
    // Earliest clock first; on a tie the later rank, whose B's the earlier ones wait for.
    heap_.push({-ranks_[r].clock, r, ranks_[r].version});
  }

  double& FEnd(int s, int k) { return f_end_[static_cast<size_t>(s) * m_ + k]; }
  double& BEnd(int s, int k) { return b_end_[static_cast<size_t>(s) * m_ + k]; }

  // The time an input produced on stage `from` (by `op`, micro-batch k) is there for rank r:
  // known, unknown with a lower bound, or never before r itself runs it (false).
  bool InputTime(int r, int from, Op op, int k, Candidate* cand) {
    const double end = op == Op::kF ? FEnd(from, k) : BEnd(from, k);
    const int q = owner_[from];
    const double comm = q != r ? c_.comm : 0.0;
    if (end >= 0) {
      cand->time = std::max(cand->time, end + comm);
      return true;
    }
    if (q == r) return false;  // this rank runs the producer first: another of its candidates
    cand->known = false;
    cand->time = std::max(cand->time, ranks_[q].clock + (op == Op::kF ? c_.f[from] : c_.b[from]) + comm);
    return true;
  }

  bool NextB(int r, int s, Candidate* cand) {
    if (nb_[s] >= nf_[s]) return false;
    const RankState& st = ranks_[r];
    if (st.guided && (st.next_b >= st.guide.size() || st.guide[st.next_b].stage != s ||
                      (!policy_.jump_backward && st.next_f < st.next_b))) {
      return false;
    }
    const int k = nb_[s];
    *cand = {Op::kB, s, true, FEnd(s, k), true};
    return s + 1 >= stages_ || InputTime(r, s + 1, Op::kB, k, cand);
  }

  // Forwards wait for their warm-up slot and for memory (counting the W's the rank can run
  // first to make room). Under `reserve` a micro-batch enters only with room for its forwards
  // on the rank's later stages, and every admitted one keeps that room until they run.
  bool NextF(int r, int s, Candidate* cand) {
    const RankState& st = ranks_[r];
    if (nf_[s] >= m_) return false;
    const int first = st.stages.front();
    const bool early_admit = policy_.fill_warmup && !st.any_b && s == first;
    if (st.guided && !early_admit &&
        (st.next_f >= st.guide.size() || st.guide[st.next_f].stage != s ||
         (!policy_.jump_forward && st.next_b < st.next_f))) {
      return false;
    }
    if (s == first && nf_[s] - nb_[s] >= st.cap) return false;
    double after = st.live + c_.activation[s];
    if (policy_.reserve && st.stages.size() > 1) {
      double pending = 0;
      for (size_t i = 1; i < st.stages.size(); ++i) {
        const int later = st.stages[i];
        pending += c_.activation[later] * (nf_[first] - nf_[later] + (s == first ? 1 : 0) - (s == later ? 1 : 0));
      }
      after += pending;
    }
    const double limit = limits_[r];
    if (!WithinMemLimit(after - st.owed_free, limit)) return false;
    const int k = nf_[s];
    *cand = {Op::kF, s, true, 0.0, WithinMemLimit(after, limit)};
    if (s == first && k > 0 && r < static_cast<int>(policy_.admit_gap.size())) {
      cand->time = st.last_admit + policy_.admit_gap[r];
    }
    return s == 0 || InputTime(r, s - 1, Op::kF, k, cand);
  }

  // Among candidates starting at the same time: B before F (it frees memory and others wait
  // for its gradient), then the stage the policy prefers.
  bool Before(const Candidate& a, const Candidate& b) const {
    if (a.op != b.op) return a.op == Op::kB;
    const bool later = a.op == Op::kB ? policy_.later_backward_first : policy_.later_forward_first;
    return later ? a.stage > b.stage : a.stage < b.stage;
  }

  // One turn of rank r: runs an action, or waits until a neighbour has scheduled more.
  // `force`: act on what is known even if an unknown input might come sooner.
  Step Decide(int r, bool force) {
    RankState& st = ranks_[r];
    const double now = st.clock;
    const bool has_w = !st.owed.empty();
    const Candidate* ready_b = nullptr;
    const Candidate* ready_f = nullptr;
    const Candidate* first_known = nullptr;
    double unknown = kInf;
    int n = 0;
    for (int s : st.stages) {
      for (Op op : {Op::kB, Op::kF}) {
        Candidate& cand = buffer_[n];
        if (!(op == Op::kB ? NextB(r, s, &cand) : NextF(r, s, &cand))) continue;
        if (op == Op::kF && !cand.fits_now && !has_w) continue;  // rounding; W's are gone
        ++n;
        if (!cand.known) {
          unknown = std::min(unknown, cand.time);
          continue;
        }
        if (cand.time <= now) {
          const Candidate*& ready = op == Op::kB ? ready_b : ready_f;
          if (ready == nullptr || Before(cand, *ready)) ready = &cand;
        }
        if (first_known == nullptr || cand.time < first_known->time ||
            (cand.time == first_known->time && Before(cand, *first_known))) {
          first_known = &cand;
        }
      }
    }

    if (ready_b != nullptr && !(policy_.alternate && ready_f != nullptr && st.last_was_b)) {
      Put(r, Op::kB, ready_b->stage, now);
      return Step::kActed;
    }
    if (ready_f != nullptr) {
      if (ready_f->fits_now) {
        Put(r, Op::kF, ready_f->stage, now);
      } else {
        Put(r, Op::kW, -1, now);  // NextF counted on W's freeing room
      }
      return Step::kActed;
    }

    // Nothing can start now. The first known start, and the earliest an unknown one could be.
    const double known = first_known != nullptr ? first_known->time : kInf;
    const double earliest = std::min(known, unknown);
    if (has_w) {
      const double w = c_.w[st.owed.front()];
      if (now + w <= earliest) {  // fills the gap without delaying anything
        Put(r, Op::kW, -1, now);
        return Step::kActed;
      }
      if (known <= unknown) {
        const bool f_blocked = first_known->op == Op::kF && !first_known->fits_now;
        const bool fill = policy_.balance_idle ? known - now > IdleAllowance(r) : known - now >= policy_.fill_ratio * w;
        if (fill || f_blocked) {
          Put(r, Op::kW, -1, now);
        } else {
          Put(r, first_known->op, first_known->stage, known);
        }
        return Step::kActed;
      }
      if (force) {
        Put(r, Op::kW, -1, now);
        return Step::kActed;
      }
      return Step::kWaitCanForce;
    }
    if (known < kInf && (known <= unknown || force)) {
      Put(r, first_known->op, first_known->stage, known);  // with no W owed, NextF's room is there now
      return Step::kActed;
    }
    return known < kInf ? Step::kWaitCanForce : Step::kWaitCannot;
  }

  // balance_idle: the idle time rank r may still take on before it fills a gap with a W.
  double IdleAllowance(int r) const {
    double allowed = most_idle_ - ranks_[r].idle;
    if (r < static_cast<int>(policy_.idle_allowance.size())) allowed = std::max(allowed, policy_.idle_allowance[r]);
    return allowed;
  }

  // Runs `op` on `stage` (a W: the oldest owed one) at `start`.
  void Put(int r, Op op, int stage, double start) {
    RankState& st = ranks_[r];
    int mb = 0;
    double end = start;
    switch (op) {
      case Op::kF:
        mb = nf_[stage]++;
        end = start + c_.f[stage];
        FEnd(stage, mb) = end;
        st.live += c_.activation[stage];
        st.last_was_b = false;
        if (stage == st.stages.front()) {
          st.last_admit = start;
          st.most_in_flight = std::max(st.most_in_flight, nf_[stage] - nb_[stage]);
        }
        if (st.guided) {
          st.done[stage == st.stages.front() ? st.admit_pos[mb] : st.next_f] = 1;
          st.next_f = NextInGuide(st, st.next_f, Op::kF);
        }
        break;
      case Op::kB:
        mb = nb_[stage]++;
        end = start + c_.b[stage];
        BEnd(stage, mb) = end;
        st.live -= c_.activation[stage] * (1 - c_.w_share);
        st.owed.push_back(stage);
        st.owed_free += c_.activation[stage] * c_.w_share;
        st.last_was_b = true;
        st.any_b = true;
        if (st.guided) {
          st.done[st.next_b] = 1;
          st.next_b = NextInGuide(st, st.next_b, Op::kB);
        }
        break;
      default:
        stage = st.owed.front();
        st.owed.pop_front();
        mb = nw_[stage]++;
        end = start + c_.w[stage];
        st.live -= c_.activation[stage] * c_.w_share;
        st.owed_free = st.owed.empty() ? 0.0 : st.owed_free - c_.activation[stage] * c_.w_share;
        ++st.done_w;
        break;
    }
    if (st.list.empty()) {
      st.first_start = start;
    } else if (start > st.clock) {
      st.idle += start - st.clock;
      most_idle_ = std::max(most_idle_, st.idle);
    }
    st.list.push_back({op, stage, mb});
    st.clock = end;
    makespan_ = std::max(makespan_, end);
  }

  const StageCosts& c_;
  const std::vector<int>& owner_;
  const int p_, m_, stages_;
  const std::vector<double>& limits_;
  const ListPolicy& policy_;
  std::vector<RankState> ranks_;
  std::vector<int> nf_, nb_, nw_;      // per stage: the next micro-batch of each kind
  std::vector<double> f_end_, b_end_;  // -1: not scheduled yet
  std::vector<Candidate> buffer_;
  bool multi_stage_ = false;
  double makespan_ = 0;
  double most_idle_ = 0;  // the most idle time any rank has had so far
  // (-clock, rank, version): a max-heap on -clock is a min-heap on clock, later rank first.
  std::priority_queue<std::tuple<double, int, int>> heap_;
  // Blocked ranks that could act if forced, earliest clock first, later rank first on a tie.
  std::set<std::pair<double, int>> waiting_;
};

}  // namespace

Result<ListSchedule> RunListScheduler(const StageCosts& costs, const std::vector<int>& stage_to_rank,
                                      int microbatches, const std::vector<double>& rank_limits,
                                      const ListPolicy& policy) {
  const int p = static_cast<int>(rank_limits.size());
  std::vector<double> need(p, 0.0);
  for (size_t s = 0; s < stage_to_rank.size(); ++s) {
    if (stage_to_rank[s] < 0 || stage_to_rank[s] >= p) {
      return InvalidArgument("stage_to_rank: stage " + std::to_string(s) + " on a rank out of range");
    }
    need[stage_to_rank[s]] += costs.activation[s];
  }
  for (int r = 0; r < p; ++r) {
    if (!(need[r] <= rank_limits[r])) {
      return InvalidArgument("mem-limit: rank " + std::to_string(r) +
                             " needs more than its limit for one micro-batch");
    }
  }
  return ListScheduler(costs, stage_to_rank, microbatches, rank_limits, policy).Run();
}

Result<ListSchedule> RunListScheduler(const StageCosts& costs, int pp, int microbatches, double mem_limit,
                                      const ListPolicy& policy) {
  return RunListScheduler(costs, LoopedPlacement(pp, 1), microbatches, std::vector<double>(pp, mem_limit), policy);
}

}  // namespace pipecoord::schedules
