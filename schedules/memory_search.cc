// The memory-aware search: see memory_search.h for what is searched and why.
#include "schedules/memory_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "schedules/cost_model.h"
#include "schedules/cost_replay.h"
#include "schedules/simulator.h"
#include "schedules/zb_list_scheduler.h"
#include "schedules/zb_rank_order.h"

namespace pipecoord::schedules {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Actions one search may list-schedule or time, about 1 s of work, but never fewer than 8
// candidates: at p=16, m=64 the cap of 600 list-scheduler runs binds first; p=128, m=1024
// gets about a dozen.
constexpr double kWorkBudget = 5e6;
constexpr int kMinCandidates = 8;
constexpr int kMaxListRuns = 3000;
// The random walk stops after this many moves in a row that found nothing shorter.
constexpr int kWanderPatience = 400;

using RankLists = std::vector<std::vector<Action>>;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string Join(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

Schedule Shape(const ScheduleSpec& spec, bool v_placement) {
  return v_placement ? MakeSchedule("v-auto", spec.pp, 2, spec.microbatches, VPlacement(spec.pp))
                     : MakeSchedule("zb-auto", spec.pp, 1, spec.microbatches, LoopedPlacement(spec.pp, 1));
}

// Activations one micro-batch leaves on each rank's stages.
std::vector<double> RankShare(const Schedule& shape, const StageCosts& c) {
  std::vector<double> share(shape.pp, 0.0);
  for (int s = 0; s < shape.num_stages(); ++s) share[shape.stage_to_rank[s]] += c.activation[s];
  return share;
}

class Search {
 public:
  Search(const ScheduleSpec& spec, bool v_placement, double limit)
      : spec_(spec), v_(v_placement), p_(spec.pp), m_(spec.microbatches), limit_(limit), limits_(p_, limit),
        shape_(Shape(spec, v_placement)), c_(ResolveCosts(spec.costs, shape_)) {
    actions_ = 3.0 * shape_.num_stages() * m_;
    work_left_ = std::max(kWorkBudget, kMinCandidates * 2 * actions_);
    for (int s = 0; s < shape_.num_stages(); ++s) {
      if (shape_.stage_to_rank[s] == 0) pace_ += c_.f[s] + c_.b[s] + c_.w[s];
    }
    if (spec.least_makespan_suffices) least_makespan_ = LeastStepTime(shape_, c_).makespan;
  }

  SearchResult Run() {
    TryHandcrafted();
    TryFallback();
    if (!v_) TryRankOrders();
    TryListScheduler();
    TryReplays();
    DescendFromTheBest();
    Wander();
    PolishBest();
    SearchResult result;
    result.mem_limit = limit_;
    result.span = best_time_.span;
    result.makespan = best_time_.makespan;
    result.baseline = v_ ? "zbv" : "zbh1";
    result.baseline_span = baseline_span_;
    result.winner = best_label_;
    result.candidates = candidates_;
    result.schedule = shape_;
    result.schedule.ranks = std::move(best_);
    return result;
  }

 private:
  // Charges the work of one candidate (`runs` list-scheduler runs and timings); false once the
  // budget is spent.
  bool Charge(double runs = 1) {
    if (work_left_ <= 0) return false;
    work_left_ -= 2 * actions_ * runs;
    return true;
  }

  bool Fits(const RankLists& ranks) {
    shape_.ranks = ranks;
    const std::vector<double> peaks = PeakActivations(shape_, c_);
    for (int r = 0; r < p_; ++r) {
      if (!WithinMemLimit(peaks[r], limits_[r])) return false;
    }
    return true;
  }

  // Simulated step time, or +inf when the lists cannot finish.
  StepTime Time(const RankLists& ranks) {
    shape_.ranks = ranks;
    auto sim = Simulate(shape_, spec_.costs);
    return sim.ok() ? MeasureStepTime(*sim) : StepTime{kInf, kInf};
  }

  // Keeps `ranks` if it is shorter than the best so far (ties keep the earlier one).
  bool Offer(RankLists&& ranks, const StepTime& t, std::string label) {
    ++candidates_;
    if (!Shorter(t, best_time_)) return false;
    best_time_ = t;
    best_ = std::move(ranks);
    best_label_ = std::move(label);
    // A caller pricing the makespan alone gains nothing from the rest of the search.
    if (ReachesLeastStepTime(StepTime{0, t.makespan}, StepTime{0, least_makespan_})) work_left_ = 0;
    return true;
  }

  // The placement's handcrafted schedules, whatever the budget; the baseline first, so that a
  // tie keeps it. Each one's order also guides the replays.
  void TryHandcrafted() {
    ScheduleSpec spec = spec_;
    spec.vpp = v_ ? 2 : 1;
    const std::vector<std::pair<Generator, const char*>> flat = {{GenerateZbh1, "zbh1"}, {GenerateZbh2, "zbh2"}};
    const std::vector<std::pair<Generator, const char*>> vee = {
        {GenerateZbv, "zbv"}, {GenerateVHalf, "v-half"}, {GenerateVMin, "v-min"}, {GenerateDualPipeV, "dualpipev"}};
    for (auto [generate, name] : v_ ? vee : flat) {
      auto s = generate(spec);
      if (!s.ok()) continue;  // dualpipev refuses m < 2p
      Charge(v_ ? 11 : 1);    // the V generators replay their orders (cost_replay.h: 11 runs)
      guides_.push_back({s->ranks, name});
      if (!Fits(s->ranks)) continue;
      const StepTime t = Time(s->ranks);
      if (guides_.size() == 1) baseline_span_ = t.span;
      Offer(std::move(s->ranks), t, name);
    }
  }

  // One list-scheduler run that always finishes within the limit (one stage per rank, or
  // room held for the way back), whatever the budget: the search never comes back empty.
  void TryFallback() {
    ListTry t;
    t.policy.reserve = true;
    t.policy.max_in_flight.resize(p_, m_);
    for (int r = 0; r < p_ && !v_; ++r) t.policy.max_in_flight[r] = std::clamp(p_ - r, 1, m_);  // 1F1B's
    ++list_runs_;
    work_left_ -= 2 * actions_;
    auto out = RunListScheduler(c_, shape_.stage_to_rank, m_, limits_, t.policy);
    if (!out.ok() || !Fits(out->ranks)) return;  // a bug: RunSearch reports it
    t.time = Time(out->ranks);
    Offer(std::move(out->ranks), t.time, "list " + Describe(t.policy));
  }

  // With budget left: a seeded random walk from the best descents (one to three ranks'
  // depths or paces moved by one or two steps at a time, a move kept when it is no longer),
  // which crosses the plateaus where single moves change nothing; it ends with the budget or
  // after kWanderPatience moves without a shorter schedule.
  void Wander() {
    if (descents_.empty()) return;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    auto next = [&seed](uint64_t n) {  // splitmix64: the same walk on every platform
      seed += 0x9e3779b97f4a7c15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      return (z ^ (z >> 31)) % n;
    };
    const double pace_step = pace_ / 12;
    int stall = 0;  // moves since the best schedule last got shorter
    for (size_t round = 0; stall < (v_ ? 3 : 1) * kWanderPatience; ++round) {
      ListTry& cur = descents_[round % std::min<size_t>(descents_.size(), 3)];
      if (cur.policy.max_in_flight.size() != static_cast<size_t>(p_)) cur.policy.max_in_flight = cur.in_flight;
      if (v_) cur.policy.admit_gap.resize(p_, 0.0);
      for (int i = 0; i < 50; ++i) {
        ListTry t = cur;
        for (int k = 0, moves = 1 + static_cast<int>(next(3)); k < moves; ++k) {
          const int r = static_cast<int>(next(p_));
          static constexpr int kDeltas[4] = {-2, -1, 1, 2};
          const int delta = kDeltas[next(4)];
          if (v_ && next(2)) {
            t.policy.admit_gap[r] = std::max(0.0, t.policy.admit_gap[r] + delta * pace_step);
          } else {
            t.policy.max_in_flight[r] = std::clamp(t.policy.max_in_flight[r] + delta, 1, m_);
          }
        }
        const StepTime before = best_time_;
        if (!RunList(&t)) return;
        stall = Shorter(best_time_, before) ? 0 : stall + 1;
        if (!Shorter(cur.time, t.time)) {
          t.policy.max_in_flight = t.in_flight;
          cur = t;
        }
      }
    }
  }

  // The best schedule's own order replayed (its W's placed again, its F's let ahead where
  // memory allows), for as long as that shortens it.
  void PolishBest() {
    for (int round = 0; round < 8 && !best_.empty(); ++round) {
      const RankLists guide = best_;
      const std::string label = best_label_;
      for (double fill : {0.0, 0.25, 0.5, 1.0}) {
        for (int jumps = 0; jumps < 4; ++jumps) {
          ListTry t;
          t.policy.fill_ratio = fill;
          t.policy.reserve = false;
          t.policy.guide = &guide;
          t.policy.jump_backward = false;
          t.policy.jump_forward = jumps & 1;
          t.policy.fill_warmup = jumps & 2;
          if (!RunList(&t, "replay of (" + label + ")")) return;
        }
      }
      if (best_label_ == label) return;  // nothing shorter
    }
  }

  // Each handcrafted order replayed under the limit: the W's (and, with jump_forward, the
  // F's) move to use the memory the order leaves free, or to stay within less than it needs.
  void TryReplays() {
    for (const auto& [guide, name] : guides_) {
      for (double fill : {0.0, 0.25, 0.5, 1.0}) {
        for (int jumps = 0; jumps < 4; ++jumps) {
          ListTry t;
          t.policy.fill_ratio = fill;
          t.policy.reserve = false;
          t.policy.guide = &guide;
          t.policy.jump_backward = false;
          t.policy.jump_forward = jumps & 1;
          t.policy.fill_warmup = jumps & 2;
          if (!RunList(&t, "replay " + name)) return;
        }
      }
    }
  }

  // The handcrafted family: rank r warms up with n0 - d r forwards and delays W as far as the
  // limit allows, up to n0 minus its warm-up (ZB-H1: n0 = p, d = 1; ZB-H2: n0 = 2p - 1, d = 2).
  void TryRankOrders() {
    const double top = limit_ / *std::max_element(c_.activation.begin(), c_.activation.end());
    std::set<int> starts = {p_, 2 * p_ - 1};
    if (top < m_) starts.insert(static_cast<int>(std::floor(top)));
    for (int n0 : starts) {
      n0 = std::clamp(n0, 1, m_);
      for (int d : {1, 2}) {
        std::vector<int> warm(p_), lag(p_);
        RankLists ranks(p_);
        for (int r = 0; r < p_; ++r) {
          warm[r] = std::clamp(n0 - d * r, 1, m_);
          // W's held back cost w_share each: as many as fit beside the warm-up.
          const double room = limit_ / c_.activation[r] - warm[r];
          const double fit = c_.w_share > 0 ? std::floor(room / c_.w_share) : kInf;
          lag[r] = static_cast<int>(std::clamp<double>(std::min<double>(n0 - warm[r], fit), 0, m_));
          ranks[r] = ZeroBubbleRankOrder(r, m_, warm[r], lag[r]);
        }
        if (!Fits(ranks)) continue;
        if (!Charge()) return;
        const StepTime t = Time(ranks);
        Offer(std::move(ranks), t, "zb-order warmup " + Join(warm) + " w-lag " + Join(lag));
      }
    }
  }

  struct ListTry {
    ListPolicy policy;
    StepTime time{kInf, kInf};
    std::vector<int> in_flight;  // what the run reached, per rank
  };

  static std::string Describe(const ListPolicy& p) {
    std::string out = p.balance_idle ? std::string("balanced idle") : "fill " + Num(p.fill_ratio);
    if (p.alternate) out += " alternate";
    if (p.guide != nullptr) {
      return out + (p.jump_forward ? " forwards ahead" : "") + (p.fill_warmup ? " full warm-up" : "");
    }
    if (!p.reserve) out += " no-reserve";
    if (!p.later_backward_first) out += " earlier-B-first";
    if (std::any_of(p.admit_gap.begin(), p.admit_gap.end(), [](double g) { return g > 0; })) {
      std::string paces;
      for (double g : p.admit_gap) paces += (paces.empty() ? "" : ",") + Num(g);
      out += " pace " + paces;
    }
    return out + " warm-up " + Join(p.max_in_flight);
  }

  // One list-scheduler run, timed by the simulator (the plan is exact without a pace, an upper
  // bound with one); false when the budget is spent.
  bool RunList(ListTry* t, const std::string& label = "list") {
    if (list_runs_ >= kMaxListRuns || !Charge()) return false;
    ++list_runs_;
    t->time = {kInf, kInf};
    auto out = RunListScheduler(c_, shape_.stage_to_rank, m_, limits_, t->policy);
    if (!out.ok() || !Fits(out->ranks)) return true;  // stuck, or over by rounding
    t->in_flight = out->in_flight;
    t->time = Time(out->ranks);
    Offer(std::move(out->ranks), t->time, label + " " + Describe(t->policy));
    return true;
  }

  // Warm-up depths to start from: how many forwards fill the wait for the first input
  // gradient (scaled), 1F1B's, ZB-H2's, and as many as memory allows.
  std::vector<std::vector<int>> StartingDepths() const {
    if (v_) return {std::vector<int>(p_, m_)};  // on the V, memory and the pace set the depth
    // Rank r's first B can start sum(f[r..p-1]) + sum(b[r+1..p-1]) + 2(p-1-r) comm after its
    // first F does; summed from the last rank up.
    // As many forwards as end before it (floor: the input gradient finds the rank free) or
    // as cover it (ceil: the rank never idles, the gradient may wait for a forward).
    std::vector<double> wait(p_);
    double t = 0;
    for (int r = p_ - 1; r >= 0; --r) {
      t += c_.f[r] + (r + 1 < p_ ? c_.b[r + 1] + 2 * c_.comm : 0);
      wait[r] = c_.f[r] > 0 ? t / c_.f[r] : kInf;
    }
    std::vector<std::vector<int>> out;
    for (double scale : {1.0, 0.75, 1.25, 0.5, 1.5, 2.0}) {
      std::vector<int> up(p_), down(p_);
      for (int r = 0; r < p_; ++r) {
        up[r] = static_cast<int>(std::clamp<double>(std::ceil(scale * wait[r] - 1e-9), 1, m_));
        down[r] = static_cast<int>(std::clamp<double>(std::floor(scale * wait[r] + 1e-9), 1, m_));
      }
      out.push_back(up);
      out.push_back(down);
    }
    std::vector<int> h1(p_), h2(p_), all(p_, m_);
    for (int r = 0; r < p_; ++r) {
      h1[r] = p_ - r;
      h2[r] = 2 * (p_ - r) - 1;
    }
    out.push_back(h1);
    out.push_back(h2);
    out.push_back(all);
    for (auto& v : out) {
      for (int& x : v) x = std::clamp(x, 1, m_);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  // The policies the grid tries; each keeps its best starting depth and pace.
  std::vector<ListPolicy> Policies() const {
    std::vector<ListPolicy> out;
    if (!v_) {
      for (auto [fill, alternate] : {std::pair{1.0, false}, std::pair{0.0, false}, std::pair{1.0, true},
                                     std::pair{0.5, false}, std::pair{0.0, true}, std::pair{0.5, true}}) {
        ListPolicy p;
        p.fill_ratio = fill;
        p.alternate = alternate;
        out.push_back(p);
      }
      ListPolicy balanced;  // W's into the gaps of the ranks that idled most
      balanced.balance_idle = true;
      out.push_back(balanced);
      return out;
    }
    for (bool reserve : {false, true}) {
      for (bool later_b : {true, false}) {
        for (double fill : {0.0, 0.5, 1.0}) {
          ListPolicy p;
          p.fill_ratio = fill;
          p.reserve = reserve;
          p.later_backward_first = later_b;
          out.push_back(p);
        }
      }
    }
    return out;
  }

  // Paces for rank 0's admissions, in parts of its time per micro-batch (0: as fast as it
  // can). On the flat placement only 0: its warm-up depths do that job.
  std::vector<double> Paces() const {
    if (!v_) return {0.0};
    return {0.0, 0.25 * pace_, 0.5 * pace_, 0.75 * pace_, pace_};
  }

  void TryListScheduler() {
    const std::vector<std::vector<int>> starts = StartingDepths();
    std::vector<ListTry> best_per_policy;
    for (const ListPolicy& policy : Policies()) {
      ListTry best;
      best.policy = policy;
      for (double pace : Paces()) {
        for (const auto& depths : starts) {
          ListTry t = best;
          t.policy.max_in_flight = depths;
          t.policy.admit_gap.assign(pace > 0 ? 1 : 0, pace);
          if (!RunList(&t)) break;
          if (Shorter(t.time, best.time)) best = t;
        }
      }
      if (best.time.span < kInf) best_per_policy.push_back(best);
    }
    std::stable_sort(best_per_policy.begin(), best_per_policy.end(),
                     [](const ListTry& a, const ListTry& b) { return Shorter(a.time, b.time); });
    descents_ = std::move(best_per_policy);
  }

  // The local search from each policy's best start, the most promising first, while the
  // budget lasts.
  void DescendFromTheBest() {
    for (ListTry& start : descents_) {
      if (!LocalSearch(&start)) break;
    }
  }

  // First-improvement descent, until no move shortens the step: one rank's warm-up depth at a
  // time, and all ranks' at once; on the V also one rank's pace at a time (rank 0's sets the
  // rhythm, the others' keep micro-batches from bunching up). False when the budget ran out.
  bool LocalSearch(ListTry* cur) {
    using Key = std::pair<std::vector<int>, std::vector<double>>;
    auto key = [](const ListPolicy& p) { return Key{p.max_in_flight, p.admit_gap}; };
    // Depths that bind: what the run reached (a tighter cap changes it, a looser one does not).
    cur->policy.max_in_flight = cur->in_flight;
    if (v_) cur->policy.admit_gap.resize(p_, 0.0);
    std::set<Key> seen = {key(cur->policy)};
    const double pace_step = pace_ / 12;
    bool improved = true;
    while (improved) {
      improved = false;
      for (int move = 0; move < (v_ ? 2 : 1); ++move) {  // 0: depths, 1: paces
        for (int r = (move == 0 ? -1 : 0); r < p_; ++r) {  // r = -1: every rank at once
          for (int step : {1, -1}) {
            if (list_runs_ >= kMaxListRuns || work_left_ <= 0) return false;
            ListTry t = *cur;
            if (move == 1) {
              double& gap = t.policy.admit_gap[r];
              const double next = std::max(0.0, gap + step * pace_step);
              if (next == gap) continue;
              gap = next;
            } else {
              const std::vector<int>& from = cur->policy.max_in_flight;
              if (r >= 0 && std::clamp(from[r] + step, 1, m_) == from[r]) continue;  // cheap no-op check
              for (int q = std::max(r, 0); q < (r < 0 ? p_ : r + 1); ++q) {
                t.policy.max_in_flight[q] = std::clamp(from[q] + step, 1, m_);
              }
            }
            if (!seen.insert(key(t.policy)).second) continue;
            if (!RunList(&t)) return false;
            if (Shorter(t.time, cur->time)) {
              t.policy.max_in_flight = t.in_flight;
              *cur = t;
              improved = true;
            }
          }
        }
      }
    }
    return true;
  }

  const ScheduleSpec& spec_;
  const bool v_;
  const int p_, m_;
  const double limit_;
  const std::vector<double> limits_;
  Schedule shape_;  // the schedule's shape; its ranks are the candidate being measured
  const StageCosts c_;
  double actions_ = 0;  // compute actions in one candidate
  double pace_ = 0;     // rank 0's time for one micro-batch (all its stages' F, B and W)
  double work_left_ = 0;
  double least_makespan_ = -1;  // with spec.least_makespan_suffices: the bound that ends the search
  int list_runs_ = 0;
  int candidates_ = 0;
  std::vector<std::pair<RankLists, std::string>> guides_;
  std::vector<ListTry> descents_;  // each policy's best grid point, shortest first
  RankLists best_;
  StepTime best_time_{kInf, kInf};
  std::string best_label_;
  double baseline_span_ = -1;
};

// The baseline (zbh1, zbv) when no schedule can be shorter: it fits the limit, its longest rank
// span is the most work any rank has (no rank idles between its first action and its last),
// and its makespan is the least any schedule can have (each rank's work after the earliest its
// first input can arrive). The search tries it first and ties keep the earlier candidate, so
// the search would end with it: returned without searching. (Under the planner's unit costs
// zbv reaches both bounds from a few micro-batches per rank on; zbh1 reaches the makespan's
// only (some rank idles between its first action and its last), so the search runs on for a
// shorter span unless spec.least_makespan_suffices, when the makespan's bound alone is asked.)
std::optional<SearchResult> ProvablyShortestBaseline(const ScheduleSpec& spec, bool v_placement, double limit) {
  auto base = v_placement ? GenerateZbv(spec) : GenerateZbh1(spec);
  if (!base.ok()) return std::nullopt;
  Schedule shape = Shape(spec, v_placement);
  if (base->stage_to_rank != shape.stage_to_rank) return std::nullopt;
  shape.ranks = std::move(base->ranks);
  const StageCosts c = ResolveCosts(spec.costs, shape);
  const std::vector<double> peaks = PeakActivations(shape, c);
  for (double peak : peaks) {
    if (!WithinMemLimit(peak, limit)) return std::nullopt;
  }
  auto sim = Simulate(shape, spec.costs);
  if (!sim.ok()) return std::nullopt;
  const StepTime t = MeasureStepTime(*sim);
  StepTime least = LeastStepTime(shape, c);
  if (spec.least_makespan_suffices) least.span = t.span;  // the caller does not price the span
  if (!ReachesLeastStepTime(t, least)) return std::nullopt;
  SearchResult r;
  r.schedule = std::move(shape);
  r.mem_limit = limit;
  r.span = r.baseline_span = t.span;
  r.makespan = t.makespan;
  r.baseline = r.winner = v_placement ? "zbv" : "zbh1";
  r.candidates = 1;
  return r;
}

Result<SearchResult> RunSearch(const ScheduleSpec& given, bool v_placement, bool shortcut) {
  const char* name = v_placement ? "v-auto" : "zb-auto";
  ScheduleSpec spec = given;
  if (spec.vpp == 0) spec.vpp = v_placement ? 2 : 1;  // the registry's default
  if (v_placement) {
    if (spec.pp < 1) return InvalidArgument("pp: must be >= 1, got " + std::to_string(spec.pp));
    if (spec.microbatches < 1) {
      return InvalidArgument("microbatches: must be >= 1, got " + std::to_string(spec.microbatches));
    }
    if (spec.vpp != 2) {
      return InvalidArgument("vpp: schedule v-auto places exactly 2 chunk(s) per rank, got " + std::to_string(spec.vpp));
    }
  } else {
    PIPECOORD_RETURN_IF_ERROR(CheckZeroBubbleShape(spec, name));
  }
  PIPECOORD_RETURN_IF_ERROR(ValidateCostModel(spec.costs, spec.pp, spec.pp * spec.vpp));
  if (!(spec.mem_limit >= 0)) {
    return InvalidArgument("mem-limit (--mem-limit): must be >= 0 (0: the default), got " + Num(spec.mem_limit));
  }
  const double limit = spec.mem_limit > 0 ? spec.mem_limit : DefaultMemLimit(spec, v_placement);
  const Schedule shape = Shape(spec, v_placement);
  const std::vector<double> share = RankShare(shape, ResolveCosts(spec.costs, shape));
  const double least = *std::max_element(share.begin(), share.end());
  if (!(limit >= least)) {
    return InvalidArgument("mem-limit (--mem-limit): must be >= " + Num(least) +
                           ", one micro-batch's activations on a rank, the least any schedule "
                           "holds; got " + Num(limit));
  }
  if (shortcut) {
    if (std::optional<SearchResult> best = ProvablyShortestBaseline(spec, v_placement, limit)) return *std::move(best);
  }
  SearchResult found = Search(spec, v_placement, limit).Run();
  if (found.schedule.ranks.empty()) {  // the fallback always fits: never expected
    return Internal(std::string(name) + ": no schedule found within mem-limit " + Num(limit) + " (a bug: please report)");
  }
  return found;
}

}  // namespace

double DefaultMemLimit(const ScheduleSpec& spec, bool v_placement) {
  const int stages = spec.pp * (v_placement ? 2 : 1);
  if (spec.pp < 1 || !ValidateCostModel(spec.costs, spec.pp, stages).ok()) return spec.pp;
  const Schedule shape = Shape(spec, v_placement);
  const std::vector<double> share = RankShare(shape, ResolveCosts(spec.costs, shape));
  double limit = 0;
  for (int r = 0; r < spec.pp; ++r) limit = std::max(limit, (spec.pp - r) * share[r]);
  return limit;
}

Result<SearchResult> SearchZbAuto(const ScheduleSpec& spec, bool shortcut) { return RunSearch(spec, false, shortcut); }
Result<SearchResult> SearchVAuto(const ScheduleSpec& spec, bool shortcut) { return RunSearch(spec, true, shortcut); }

}  // namespace pipecoord::schedules
