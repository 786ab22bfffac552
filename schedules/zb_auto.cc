// zb-auto: see zb_auto.h for what is searched and why.
#include "schedules/zb_auto.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "schedules/cost_model.h"
#include "schedules/simulator.h"
#include "schedules/zb_list_scheduler.h"
#include "schedules/zb_rank_order.h"

namespace pipecoord::schedules {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Actions one search may time or list-schedule, about 1 s of work, but never fewer than 8
// candidates: at p=16, m=64 the cap of 600 list-scheduler runs binds first (0.05 s);
// p=128, m=1024 gets about a dozen.
constexpr double kWorkBudget = 5e6;
constexpr int kMinCandidates = 8;
constexpr int kMaxListRuns = 600;

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

class Search {
 public:
  Search(const ScheduleSpec& spec, double limit)
      : spec_(spec), p_(spec.pp), m_(spec.microbatches), limit_(limit),
        shape_(MakeSchedule("zb-auto", spec.pp, 1, spec.microbatches, LoopedPlacement(spec.pp, 1))),
        c_(ResolveCosts(spec.costs, shape_)) {
    work_left_ = std::max(kWorkBudget, kMinCandidates * CandidateWork());
  }

  ZbAutoResult Run() {
    TryHandcrafted();
    TryRankOrders();
    TryListScheduler();
    ZbAutoResult result;
    result.mem_limit = limit_;
    result.makespan = best_makespan_;
    result.zbh1_makespan = zbh1_makespan_;
    result.winner = best_label_;
    result.candidates = candidates_;
    result.schedule = shape_;
    result.schedule.ranks = std::move(best_);
    return result;
  }

 private:
  double CandidateWork() const { return 3.0 * p_ * m_; }

  // Charges one candidate's work; false once the budget is spent.
  bool Charge() {
    if (work_left_ <= 0) return false;
    work_left_ -= CandidateWork();
    return true;
  }

  bool Fits(const RankLists& ranks) {
    shape_.ranks = ranks;
    for (double peak : PeakActivations(shape_, c_)) {
      if (!(peak <= limit_)) return false;
    }
    return true;
  }

  // Simulated makespan, or +inf when the lists cannot finish.
  double Time(const RankLists& ranks) {
    shape_.ranks = ranks;
    auto sim = Simulate(shape_, spec_.costs);
    return sim.ok() ? sim->makespan : kInf;
  }

  // Keeps `ranks` if it is shorter than the best so far; a tie, or a gain within rounding
  // (1e-9 relative), keeps the earlier one.
  bool Offer(RankLists&& ranks, double makespan, std::string label) {
    ++candidates_;
    const double bar = best_makespan_ < kInf ? best_makespan_ * (1 - 1e-9) : kInf;
    if (!(makespan < bar)) return false;
    best_makespan_ = makespan;
    best_ = std::move(ranks);
    best_label_ = std::move(label);
    return true;
  }

  // zbh1 first, so that a tie keeps it; then zbh2. Both whatever the budget.
  void TryHandcrafted() {
    for (auto [generate, name] : {std::pair<Generator, const char*>{GenerateZbh1, "zbh1"},
                                  std::pair<Generator, const char*>{GenerateZbh2, "zbh2"}}) {
      auto s = generate(spec_);
      if (!s.ok() || !Fits(s->ranks)) continue;
      Charge();
      const double t = Time(s->ranks);
      if (generate == GenerateZbh1) zbh1_makespan_ = t;
      Offer(std::move(s->ranks), t, name);
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
        const double t = Time(ranks);
        Offer(std::move(ranks), t, "zb-order warmup " + Join(warm) + " w-lag " + Join(lag));
      }
    }
  }

  struct ListTry {
    ListPolicy policy;
    double makespan = kInf;
  };

  // One list-scheduler run; false when the budget is spent.
  bool RunList(ListTry* t) {
    if (list_runs_ >= kMaxListRuns || !Charge()) return false;
    ++list_runs_;
    auto out = RunListScheduler(c_, p_, m_, limit_, t->policy);
    t->makespan = kInf;
    if (!out.ok() || !Fits(out->ranks)) return true;
    t->makespan = out->makespan;
    Offer(std::move(out->ranks), out->makespan,
          "list fill " + Num(t->policy.fill_ratio) + (t->policy.alternate ? " alternate" : "") +
              " warm-up " + Join(t->policy.max_in_flight));
    return true;
  }

  // Warm-up depths to start from: how many forwards fill the wait for the first input
  // gradient (scaled), 1F1B's, ZB-H2's, and as many as memory allows.
  std::vector<std::vector<int>> StartingDepths() const {
    // Rank r's first B can start sum(f[r..p-1]) + sum(b[r+1..p-1]) + 2(p-1-r) comm after its
    // first F does; summed from the last rank up.
    std::vector<int> wait(p_);
    double t = 0;
    for (int r = p_ - 1; r >= 0; --r) {
      t += c_.f[r] + (r + 1 < p_ ? c_.b[r + 1] + 2 * c_.comm : 0);
      const double n = c_.f[r] > 0 ? std::ceil(t / c_.f[r] - 1e-9) : kInf;
      wait[r] = static_cast<int>(std::clamp<double>(n, 1, m_));
    }
    std::vector<std::vector<int>> out;
    for (double scale : {1.0, 0.75, 1.25, 0.5, 1.5, 2.0}) {
      std::vector<int> v(p_);
      for (int r = 0; r < p_; ++r) v[r] = static_cast<int>(std::ceil(scale * wait[r]));
      out.push_back(v);
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

  void TryListScheduler() {
    const std::vector<std::pair<double, bool>> policies = {
        {1.0, false}, {0.0, false}, {1.0, true}, {0.5, false}, {0.0, true}, {0.5, true}};
    const std::vector<std::vector<int>> starts = StartingDepths();
    std::vector<ListTry> best_per_policy;
    for (auto [fill, alternate] : policies) {
      ListTry best;
      best.policy.fill_ratio = fill;
      best.policy.alternate = alternate;
      for (const auto& depths : starts) {
        ListTry t = best;
        t.policy.max_in_flight = depths;
        if (!RunList(&t)) break;
        if (t.makespan < best.makespan) best = t;
      }
      if (best.makespan < kInf) best_per_policy.push_back(best);
    }
    std::stable_sort(best_per_policy.begin(), best_per_policy.end(),
                     [](const ListTry& a, const ListTry& b) { return a.makespan < b.makespan; });
    for (ListTry& start : best_per_policy) {
      if (!LocalSearch(&start)) break;
    }
  }

  // First-improvement descent over one rank's warm-up depth at a time (and all ranks at once),
  // until no move shortens the step. False when the budget ran out.
  bool LocalSearch(ListTry* cur) {
    std::set<std::vector<int>> seen = {cur->policy.max_in_flight};
    bool improved = true;
    while (improved) {
      improved = false;
      for (int r = -1; r < p_; ++r) {  // r = -1: every rank at once
        for (int step : {1, -1}) {
          if (list_runs_ >= kMaxListRuns || work_left_ <= 0) return false;
          const std::vector<int>& from = cur->policy.max_in_flight;
          if (r >= 0 && std::clamp(from[r] + step, 1, m_) == from[r]) continue;  // cheap no-op check
          ListTry t = *cur;
          for (int q = std::max(r, 0); q < (r < 0 ? p_ : r + 1); ++q) {
            t.policy.max_in_flight[q] = std::clamp(from[q] + step, 1, m_);
          }
          if (!seen.insert(t.policy.max_in_flight).second) continue;
          if (!RunList(&t)) return false;
          if (t.makespan < cur->makespan) {
            *cur = t;
            improved = true;
          }
        }
      }
    }
    return true;
  }

  const ScheduleSpec& spec_;
  const int p_, m_;
  const double limit_;
  Schedule shape_;  // the schedule's shape; its ranks are the candidate being measured
  const StageCosts c_;
  double work_left_ = 0;  // in actions
  int list_runs_ = 0;
  int candidates_ = 0;
  RankLists best_;
  double best_makespan_ = kInf;
  std::string best_label_;
  double zbh1_makespan_ = -1;
};

}  // namespace

double ZbAutoDefaultMemLimit(const ScheduleSpec& spec) {
  if (spec.pp < 1 || !ValidateCostModel(spec.costs, spec.pp, spec.pp).ok()) return spec.pp;
  Schedule shape = MakeSchedule("zb-auto", spec.pp, 1, spec.microbatches, LoopedPlacement(spec.pp, 1));
  const StageCosts c = ResolveCosts(spec.costs, shape);
  double limit = 0;
  for (int r = 0; r < spec.pp; ++r) limit = std::max(limit, (spec.pp - r) * c.activation[r]);
  return limit;
}

Result<ZbAutoResult> SearchZbAuto(const ScheduleSpec& given) {
  ScheduleSpec spec = given;
  if (spec.vpp == 0) spec.vpp = 1;  // the registry's default for zb-auto
  PIPECOORD_RETURN_IF_ERROR(CheckZeroBubbleShape(spec, "zb-auto"));
  PIPECOORD_RETURN_IF_ERROR(ValidateCostModel(spec.costs, spec.pp, spec.pp));
  if (!(spec.mem_limit >= 0)) {
    return InvalidArgument("mem-limit (--mem-limit): must be >= 0 (0: the default), got " + Num(spec.mem_limit));
  }
  const double limit = spec.mem_limit > 0 ? spec.mem_limit : ZbAutoDefaultMemLimit(spec);
  Schedule shape = MakeSchedule("zb-auto", spec.pp, 1, spec.microbatches, LoopedPlacement(spec.pp, 1));
  const StageCosts c = ResolveCosts(spec.costs, shape);
  const double least = *std::max_element(c.activation.begin(), c.activation.end());
  if (!(limit >= least)) {
    return InvalidArgument("mem-limit (--mem-limit): must be >= " + Num(least) +
                           ", one micro-batch's activations on a rank, the least any schedule "
                           "holds; got " + Num(limit));
  }
  return Search(spec, limit).Run();
}

Result<Schedule> GenerateZbAuto(const ScheduleSpec& spec) {
  auto result = SearchZbAuto(spec);
  if (!result.ok()) return result.status();
  return std::move(result->schedule);
}

}  // namespace pipecoord::schedules
