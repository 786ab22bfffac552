// Branch and bound over compute orders: see exact_schedule.h.
#include "schedules/exact_schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "schedules/cost_model.h"
#include "schedules/memory_search.h"
#include "schedules/simulator.h"

namespace pipecoord::schedules {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kEps = 1e-9;

class BranchAndBound {
 public:
  BranchAndBound(const Schedule& shape, const StageCosts& c, double limit, int64_t node_limit)
      : shape_(shape), c_(c), limit_(limit), node_limit_(node_limit), p_(shape.pp), m_(shape.microbatches),
        stages_(shape.num_stages()), nf_(stages_, 0), nb_(stages_, 0), nw_(stages_, 0),
        f_end_(static_cast<size_t>(stages_) * m_, 0.0), b_end_(static_cast<size_t>(stages_) * m_, 0.0),
        rank_stages_(p_), clock_(p_, 0.0), first_(p_, -1.0), live_(p_, 0.0), left_(p_, 0.0), lists_(p_) {
    for (int s = 0; s < stages_; ++s) {
      const int r = shape.stage_to_rank[s];
      rank_stages_[r].push_back(s);
      left_[r] += m_ * (c.f[s] + c.b[s] + c.w[s]);
    }
  }

  // A complete schedule to beat.
  void Seed(const std::vector<std::vector<Action>>& ranks, double span, double makespan) {
    best_ = ranks;
    best_span_ = span;
    best_makespan_ = makespan;
  }

  ExactResult Run() {
    Expand(-kInf, -1);
    ExactResult out;
    out.proven = nodes_ <= node_limit_;
    out.nodes = nodes_;
    out.span = best_span_;
    out.makespan = best_makespan_;
    if (!best_.empty()) {
      out.schedule = shape_;
      out.schedule.ranks = best_;
    }
    return out;
  }

 private:
  struct Move {
    double start;
    int rank;
    Op op;
    int stage;
  };

  double FEnd(int s, int k) const { return f_end_[static_cast<size_t>(s) * m_ + k]; }
  double BEnd(int s, int k) const { return b_end_[static_cast<size_t>(s) * m_ + k]; }
  double Comm(int from_stage, int r) const { return shape_.stage_to_rank[from_stage] != r ? c_.comm : 0.0; }

  // Every action a rank could run next and when it would start.
  void Moves(std::vector<Move>* out) const {
    for (int r = 0; r < p_; ++r) {
      for (int s : rank_stages_[r]) {
        if (nb_[s] < nf_[s] && (s + 1 == stages_ || nb_[s + 1] > nb_[s])) {
          const double ready = s + 1 == stages_ ? 0.0 : BEnd(s + 1, nb_[s]) + Comm(s + 1, r);
          out->push_back({std::max(clock_[r], ready), r, Op::kB, s});
        }
        if (nf_[s] < m_ && (s == 0 || nf_[s - 1] > nf_[s]) && live_[r] + c_.activation[s] <= limit_ + kEps) {
          const double ready = s == 0 ? 0.0 : FEnd(s - 1, nf_[s]) + Comm(s - 1, r);
          out->push_back({std::max(clock_[r], ready), r, Op::kF, s});
        }
        if (nw_[s] < nb_[s]) out->push_back({clock_[r], r, Op::kW, s});
      }
    }
  }

  // No complete schedule below this node has a shorter longest rank span. A rank ends no
  // earlier than its clock (or the time reached) plus the work it has left, nor before the
  // last micro-batch's backward has come down the pipeline to each of its stages and that
  // stage's last W has run: B(s, m-1) needs B(s+1, m-1), and on its rank every F left and
  // every B left of stage s and the stages above it run before it.
  double LowerBound(double now) const {
    for (int s = stages_ - 1; s >= 0; --s) {
      const int r = shape_.stage_to_rank[s];
      if (nb_[s] == m_) {
        b_last_[s] = BEnd(s, m_ - 1);
        continue;
      }
      double before = 0;  // work on rank r that precedes B(s, m-1)
      for (int t : rank_stages_[r]) {
        before += (m_ - nf_[t]) * c_.f[t] + (t >= s ? (m_ - nb_[t]) * c_.b[t] : 0.0);
      }
      double end = std::max(clock_[r], now) + before;
      if (s + 1 < stages_) end = std::max(end, b_last_[s + 1] + Comm(s + 1, r) + c_.b[s]);
      b_last_[s] = end;
    }
    double bound = 0;
    for (int r = 0; r < p_; ++r) {
      if (first_[r] < 0) {
        bound = std::max(bound, left_[r]);
        continue;
      }
      double end = left_[r] > kEps ? std::max(clock_[r], now) + left_[r] : clock_[r];
      for (int s : rank_stages_[r]) {
        if (nw_[s] < m_) end = std::max(end, b_last_[s] + c_.w[s]);
      }
      bound = std::max(bound, end - first_[r]);
    }
    return bound;
  }

  // Places actions in (start, rank) order after (now, last_rank).
  void Expand(double now, int last_rank) {
    if (++nodes_ > node_limit_) return;
    if (placed_ == total()) {
      Complete();
      return;
    }
    if (LowerBound(now) >= best_span_ - kEps * std::max(1.0, best_span_)) return;
    std::vector<Move> moves;
    Moves(&moves);
    // Earliest first (B, then F, then W on a tie): a good schedule early cuts more.
    auto rank_of = [](Op op) { return op == Op::kB ? 0 : op == Op::kF ? 1 : 2; };
    std::sort(moves.begin(), moves.end(), [&](const Move& a, const Move& b) {
      if (a.start != b.start) return a.start < b.start;
      return rank_of(a.op) < rank_of(b.op);
    });
    for (const Move& mv : moves) {
      const bool later = mv.start > now + kEps || (mv.start >= now - kEps && mv.rank > last_rank);
      if (!later) continue;  // built in another order
      Apply(mv);
      Expand(std::max(now, mv.start), mv.rank);
      Undo(mv);
      if (nodes_ > node_limit_) return;
    }
  }

  int64_t total() const { return 3LL * stages_ * m_; }

  double Duration(Op op, int s) const { return op == Op::kF ? c_.f[s] : op == Op::kB ? c_.b[s] : c_.w[s]; }

  double Freed(Op op, int s) const {
    return op == Op::kF ? -c_.activation[s]
                        : c_.activation[s] * (op == Op::kB ? 1 - c_.w_share : c_.w_share);
  }

  void Apply(const Move& mv) {
    const int r = mv.rank, s = mv.stage;
    const double end = mv.start + Duration(mv.op, s);
    saved_.push_back({clock_[r], first_[r]});
    int mb = 0;
    switch (mv.op) {
      case Op::kF:
        mb = nf_[s]++;
        f_end_[static_cast<size_t>(s) * m_ + mb] = end;
        break;
      case Op::kB:
        mb = nb_[s]++;
        b_end_[static_cast<size_t>(s) * m_ + mb] = end;
        break;
      default:
        mb = nw_[s]++;
        break;
    }
    live_[r] -= Freed(mv.op, s);
    left_[r] -= Duration(mv.op, s);
    if (first_[r] < 0) first_[r] = mv.start;
    clock_[r] = end;
    lists_[r].push_back({mv.op, s, mb});
    ++placed_;
  }

  void Undo(const Move& mv) {
    const int r = mv.rank, s = mv.stage;
    (mv.op == Op::kF ? nf_ : mv.op == Op::kB ? nb_ : nw_)[s]--;
    live_[r] += Freed(mv.op, s);
    left_[r] += Duration(mv.op, s);
    clock_[r] = saved_.back().first;
    first_[r] = saved_.back().second;
    saved_.pop_back();
    lists_[r].pop_back();
    --placed_;
  }

  void Complete() {
    double span = 0, makespan = 0;
    for (int r = 0; r < p_; ++r) {
      span = std::max(span, clock_[r] - first_[r]);
      makespan = std::max(makespan, clock_[r]);
    }
    const double tol = kEps * std::max(1.0, best_span_ < kInf ? best_span_ : 1.0);
    if (span < best_span_ - tol || (span <= best_span_ + tol && makespan < best_makespan_ - tol)) {
      best_span_ = span;
      best_makespan_ = makespan;
      best_ = lists_;
    }
  }

  const Schedule& shape_;
  const StageCosts& c_;
  const double limit_;
  const int64_t node_limit_;
  const int p_, m_, stages_;
  std::vector<int> nf_, nb_, nw_;
  std::vector<double> f_end_, b_end_;
  std::vector<std::vector<int>> rank_stages_;
  std::vector<double> clock_, first_, live_, left_;
  std::vector<std::vector<Action>> lists_;
  mutable std::vector<double> b_last_ = std::vector<double>(stages_, 0.0);  // LowerBound's scratch
  std::vector<std::pair<double, double>> saved_;
  int64_t placed_ = 0;
  int64_t nodes_ = 0;
  double best_span_ = kInf, best_makespan_ = kInf;
  std::vector<std::vector<Action>> best_;
};

}  // namespace

Result<ExactResult> ExactShortestSchedule(const ScheduleSpec& spec, const ExactOptions& options) {
  if (spec.pp < 1) return InvalidArgument("pp: must be >= 1, got " + std::to_string(spec.pp));
  if (spec.microbatches < 1) {
    return InvalidArgument("microbatches: must be >= 1, got " + std::to_string(spec.microbatches));
  }
  const int vpp = options.v_placement ? 2 : 1;
  const Schedule shape = options.v_placement
                             ? MakeSchedule("exact", spec.pp, 2, spec.microbatches, VPlacement(spec.pp))
                             : MakeSchedule("exact", spec.pp, 1, spec.microbatches, LoopedPlacement(spec.pp, 1));
  PIPECOORD_RETURN_IF_ERROR(ValidateCostModel(spec.costs, spec.pp, spec.pp * vpp));
  if (!(spec.mem_limit >= 0)) return InvalidArgument("mem-limit: must be >= 0 (0: the default)");
  const double limit = spec.mem_limit > 0 ? spec.mem_limit : DefaultMemLimit(spec, options.v_placement);
  const StageCosts c = ResolveCosts(spec.costs, shape);
  std::vector<double> share(spec.pp, 0.0);
  for (int s = 0; s < shape.num_stages(); ++s) share[shape.stage_to_rank[s]] += c.activation[s];
  for (int r = 0; r < spec.pp; ++r) {
    if (!(share[r] <= limit + kEps)) {
      return InvalidArgument("mem-limit: must be >= one micro-batch's activations on rank " + std::to_string(r));
    }
  }
  BranchAndBound search(shape, c, limit, options.node_limit);
  if (options.start != nullptr) {
    Schedule start = shape;
    start.ranks = options.start->ranks;
    const std::vector<double> peaks = PeakActivations(start, c);
    auto sim = Simulate(start, spec.costs);
    if (sim.ok() && std::all_of(peaks.begin(), peaks.end(), [&](double x) { return x <= limit + kEps; })) {
      const double makespan = sim->makespan;
      double span = 0;
      for (const RankStats& r : sim->ranks) span = std::max(span, r.last_end - r.first_start);
      search.Seed(start.ranks, span, makespan);
    }
  }
  ExactResult out = search.Run();
  if (options.start != nullptr && !out.schedule.ranks.empty() && out.schedule.ranks == options.start->ranks) {
    out.from_start = true;
  }
  if (!out.schedule.ranks.empty()) {
    // The span as the simulator times the lists (it must agree with the search's own timing).
    auto sim = Simulate(out.schedule, spec.costs);
    if (!sim.ok()) return Internal("exact schedule does not run: " + sim.status().message());
    double span = 0;
    for (const RankStats& r : sim->ranks) span = std::max(span, r.last_end - r.first_start);
    if (std::abs(span - out.span) > 1e-6 * std::max(1.0, span)) {
      return Internal("exact schedule: the search timed " + std::to_string(out.span) + ", the simulator " +
                      std::to_string(span));
    }
  }
  return out;
}

}  // namespace pipecoord::schedules
