#include "jobplan/idle_breakdown.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <optional>

#include "proto/op_kinds.h"

namespace pipecoord::jobplan {
namespace {

// One rank's compute actions this step: measured and predicted windows before each.
struct Windows {
  std::vector<int> index;       // list position of each compute action
  std::vector<double> excess;   // measured idle before it - the calibrated prediction, s
  std::vector<double> late;     // its input's transfer beyond the calibrated one, s (0: on time, none)
};

struct Cause {
  int rank = -1;     // pipeline rank
  int link_to = -1;  // pipeline rank: the cause is rank's transfer to it
};

// Finds who made global rank g late: follows waits that exceeded the prediction to their root.
class CauseFinder {
 public:
  CauseFinder(const CalibratedJob& job, const RankLayout& layout, const StepActions& step, double min_s)
      : job_(job), layout_(layout), step_(step), min_s_(min_s), windows_(step.size()) {
    step_start_ = INT64_MAX;
    step_end_ = INT64_MIN;
    for (const auto& list : step) {
      for (const v1::ActionTiming& t : list) {
        step_start_ = std::min(step_start_, t.start_ns());
        step_end_ = std::max(step_end_, t.end_ns());
      }
    }
    for (size_t g = 0; g < step.size(); ++g) {
      const int r = layout.PipelineRank(static_cast<int>(g));
      const auto& timing = job.calibrated.timing[r];
      Windows& w = windows_[g];
      int prev = -1;
      for (size_t i = 0; i < step[g].size(); ++i) {
        const v1::Action& a = step[g][i].action();
        if (!v1::IsCompute(a.op())) continue;
        const double measured =
            (step[g][i].start_ns() - (prev < 0 ? step_start_ : step[g][prev].end_ns())) * 1e-9;
        const double predicted = timing[i].start - (prev < 0 ? 0.0 : timing[prev].end);
        w.index.push_back(static_cast<int>(i));
        w.excess.push_back(measured - predicted);
        where_[Key(layout.AtPipelineRank(static_cast<int>(g), 0), a)] = {static_cast<int>(g), static_cast<int>(w.index.size()) - 1};
        prev = static_cast<int>(i);
      }
    }
    // Each waited-for input's transfer: from its producer's end to this action's start (the rank
    // waited, so the input arrived then), against the calibrated timeline's gap.
    for (size_t g = 0; g < step.size(); ++g) {
      Windows& w = windows_[g];
      w.late.assign(w.index.size(), 0);
      const int r = layout.PipelineRank(static_cast<int>(g));
      for (size_t k = 0; k < w.index.size(); ++k) {
        const v1::ActionTiming& t = step[g][w.index[k]];
        if (t.wait_peer() < 0 || t.wait_ns() <= 0) continue;
        const auto producer = Producer(layout.AtPipelineRank(static_cast<int>(g), 0), t.action());
        if (!producer) continue;
        const v1::ActionTiming& p = step[producer->first][windows_[producer->first].index[producer->second]];
        const int pr = layout.PipelineRank(producer->first);
        const int pi = windows_[producer->first].index[producer->second];
        const double measured = (t.start_ns() - p.end_ns()) * 1e-9;
        const double predicted = std::max(0.0, job.calibrated.timing[r][w.index[k]].start - job.calibrated.timing[pr][pi].end);
        w.late[k] = std::max(0.0, measured - predicted);
      }
    }
  }

  // What late transfers added to global rank g's idle: each window's excess, as far as its
  // input's lateness explains it.
  double LateTransfers(int g) const {
    const Windows& w = windows_[g];
    double sum = 0;
    for (size_t k = 0; k < w.index.size(); ++k) {
      if (w.late[k] > min_s_) sum += std::min(std::max(0.0, w.excess[k]), w.late[k]);
    }
    return sum;
  }

  // The pipeline rank (or its link) whose lateness made global rank g idle longer than predicted.
  Cause Find(int g) const {
    // The step ending later than predicted shows as trailing idle: then it is whoever ended it.
    const Windows& w = windows_[g];
    const int r = layout_.PipelineRank(g);
    double trailing_excess = 0;
    if (!w.index.empty()) {
      const double measured = (step_end_ - step_[g][w.index.back()].end_ns()) * 1e-9;
      const double predicted = job_.calibrated.makespan - job_.calibrated.timing[r][w.index.back()].end;
      trailing_excess = measured - predicted;
    }
    int k = Worst(g);
    if (trailing_excess > min_s_ && (k < 0 || trailing_excess > w.excess[k])) {
      g = Last();
      k = Worst(g);
    }
    // Follow the waits: each hop is a producer action that was itself late waiting for its input.
    for (size_t hops = 0; k >= 0 && hops < 4 * step_.size(); ++hops) {
      const v1::ActionTiming& t = step_[g][windows_[g].index[k]];
      const auto producer = Producer(layout_.AtPipelineRank(g, 0), t.action());
      if (!producer) break;
      if (windows_[g].late[k] > min_s_) {  // the input left on time enough and arrived late: the link
        return {layout_.PipelineRank(producer->first), layout_.PipelineRank(g)};
      }
      g = producer->first;
      k = producer->second;
      if (windows_[g].excess[k] <= min_s_ || step_[g][windows_[g].index[k]].wait_peer() < 0) {
        k = -1;  // on time at its own input: it was late by itself
      }
    }
    return {layout_.PipelineRank(g), -1};
  }

 private:
  // `pipeline`: the global rank of pipeline rank 0 of the action's pipeline (replica and shard).
  static long Key(int pipeline, const v1::Action& a) {
    const int kind = a.op() == v1::F ? 0 : a.op() == v1::W ? 2 : 1;  // B and BW both give the input gradient
    return ((static_cast<long>(pipeline) * 3 + kind) * (1 << 20) + a.stage()) * (1 << 20) + a.microbatch();
  }
  // The compute slot of global rank g whose wait for a peer exceeded the prediction the most.
  int Worst(int g) const {
    const Windows& w = windows_[g];
    int best = -1;
    for (size_t k = 0; k < w.index.size(); ++k) {
      if (step_[g][w.index[k]].wait_peer() < 0 || w.excess[k] <= min_s_) continue;
      if (best < 0 || w.excess[k] > w.excess[best]) best = static_cast<int>(k);
    }
    return best;
  }
  // The global rank whose last action ended the step.
  int Last() const {
    int last = 0;
    int64_t end = INT64_MIN;
    for (size_t g = 0; g < step_.size(); ++g) {
      if (!step_[g].empty() && step_[g].back().end_ns() > end) {
        end = step_[g].back().end_ns();
        last = static_cast<int>(g);
      }
    }
    return last;
  }
  std::optional<std::pair<int, int>> Producer(int pipeline, const v1::Action& a) const {
    v1::Action p;
    p.set_microbatch(a.microbatch());
    if (a.op() == v1::F) {
      p.set_op(v1::F);
      p.set_stage(a.stage() - 1);
    } else {
      p.set_op(v1::B);
      p.set_stage(a.stage() + 1);
    }
    auto it = where_.find(Key(pipeline, p));
    if (it == where_.end()) return std::nullopt;
    return it->second;
  }

  const CalibratedJob& job_;
  RankLayout layout_;
  const StepActions& step_;
  double min_s_;
  std::vector<Windows> windows_;
  std::map<long, std::pair<int, int>> where_;  // (pipeline, kind, stage, mb) -> (global rank, compute slot)
  int64_t step_start_, step_end_;
};

}  // namespace

IdleBreakdown SplitIdle(const CalibratedJob& job, const RankLayout& layout, const StepActions& step,
                        double step_time_s, double min_variation_s) {
  IdleBreakdown out;
  const CauseFinder causes(job, layout, step, min_variation_s);
  std::map<std::pair<int, int>, int> cause_count;  // (rank, link_to) -> ranks it caused
  v1::IdleSplit& total = out.total;
  for (size_t g = 0; g < step.size(); ++g) {
    const int r = layout.PipelineRank(static_cast<int>(g));
    double busy = 0;
    for (const v1::ActionTiming& t : step[g]) {
      if (v1::IsCompute(t.action().op())) busy += (t.end_ns() - t.start_ns()) * 1e-9;
    }
    v1::RankIdle& ri = out.ranks.emplace_back();
    ri.set_rank(r);
    ri.set_dp_rank(layout.DataRank(static_cast<int>(g)));
    ri.set_tp_rank(layout.TensorRank(static_cast<int>(g)));
    ri.set_idle_s(step_time_s - busy);
    v1::IdleSplit* s = ri.mutable_split();
    const double equal = SimIdle(job.equal, r), stages = SimIdle(job.stages, r), calibrated = SimIdle(job.calibrated, r);
    s->set_inherent_s(equal);
    s->set_imbalance_s(stages - equal);
    const double late = causes.LateTransfers(static_cast<int>(g));
    s->set_comm_s(calibrated - stages + late);
    s->set_variation_s(ri.idle_s() - calibrated - late);
    s->set_cause_rank(-1);
    if (s->variation_s() + late > min_variation_s) {  // idle beyond the calibrated: whose?
      const Cause c = causes.Find(static_cast<int>(g));
      s->set_cause_rank(c.rank);
      if (c.link_to >= 0) {
        s->set_cause_is_link(true);
        s->set_cause_link_to(c.link_to);
      }
      ++cause_count[{c.rank, c.link_to}];
    }
    AddIdleSplit(*s, &total);
  }
  std::pair<int, int> best{-1, -1};
  int best_count = 0;
  for (const auto& [cause, n] : cause_count) {
    if (n > best_count) {
      best = cause;
      best_count = n;
    }
  }
  total.set_cause_rank(best.first);
  if (best.second >= 0) {
    total.set_cause_is_link(true);
    total.set_cause_link_to(best.second);
  }
  return out;
}

void AddIdleSplit(const v1::IdleSplit& part, v1::IdleSplit* sum) {
  sum->set_inherent_s(sum->inherent_s() + part.inherent_s());
  sum->set_imbalance_s(sum->imbalance_s() + part.imbalance_s());
  sum->set_variation_s(sum->variation_s() + part.variation_s());
  sum->set_comm_s(sum->comm_s() + part.comm_s());
}

}  // namespace pipecoord::jobplan
