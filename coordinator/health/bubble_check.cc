#include "coordinator/health/bubble_check.h"

#include <algorithm>

#include "coordinator/health/event_text.h"
#include "proto/op_kinds.h"

namespace pipecoord::coordinator::health {
namespace {

bool Same(const v1::Action& a, const v1::Action& b) {
  return a.op() == b.op() && a.stage() == b.stage() && a.microbatch() == b.microbatch();
}

}  // namespace

BubbleCheck::BubbleCheck(const jobplan::HealthSettings& settings, const jobplan::PlanExpectations& plan,
                         const RankLayout& layout)
    : settings_(settings), plan_(plan), layout_(layout), flagged_(layout.world(), false), over_(layout.world(), 0) {}

double BubbleCheck::Limit(double scale) const {
  return std::max(settings_.bubble_min_s, settings_.bubble_slack * plan_.makespan * scale);
}

std::vector<MeasuredWindow> BubbleCheck::Windows(int rank, const std::vector<v1::ActionTiming>& actions,
                                                 double scale) const {
  std::vector<MeasuredWindow> out;
  if (rank < 0 || rank >= static_cast<int>(plan_.ranks.size()) || actions.empty()) return out;
  const std::vector<jobplan::ComputeSlot>& slots = plan_.ranks[rank];
  std::vector<const v1::ActionTiming*> compute;
  for (const v1::ActionTiming& t : actions) {
    if (v1::IsCompute(t.action().op())) compute.push_back(&t);
  }
  if (compute.size() != slots.size()) return out;
  for (size_t k = 0; k < slots.size(); ++k) {
    if (!Same(compute[k]->action(), slots[k].action)) return {};
  }
  const int64_t step_start = actions.front().start_ns();
  const double trailing = slots.empty() ? 0 : plan_.makespan - slots.back().end;
  for (size_t k = 0; k < slots.size(); ++k) {
    MeasuredWindow w;
    w.slot = static_cast<int>(k);
    const int64_t from = k == 0 ? step_start : compute[k - 1]->end_ns();
    w.start_s = (from - step_start) * 1e-9;
    w.measured_s = std::max<int64_t>(0, compute[k]->start_ns() - from) * 1e-9;
    const double predicted = k == 0 ? slots[0].start + trailing : slots[k].start - slots[k - 1].end;
    w.predicted_s = predicted * scale;
    w.excess_s = w.measured_s - w.predicted_s;
    w.wait_ns = compute[k]->wait_ns();
    w.wait_peer = compute[k]->wait_peer();
    out.push_back(w);
  }
  std::sort(out.begin(), out.end(), [](const MeasuredWindow& a, const MeasuredWindow& b) { return a.excess_s > b.excess_s; });
  return out;
}

std::optional<v1::HealthEvent> BubbleCheck::OnRankStep(int g, int step, const std::vector<v1::ActionTiming>& actions,
                                                       double scale) {
  if (scale <= 0 || step < settings_.warmup_steps || g < 0 || g >= static_cast<int>(flagged_.size())) return std::nullopt;
  const int rank = layout_.PipelineRank(g);
  const std::vector<MeasuredWindow> windows = Windows(rank, actions, scale);
  const double limit = Limit(scale);
  over_[g] = !windows.empty() && windows.front().excess_s > limit ? over_[g] + 1 : 0;
  const bool over = over_[g] >= kBubblePersistence;
  const bool was = flagged_[g];
  flagged_[g] = over;
  if (!over || was) return std::nullopt;
  const MeasuredWindow& w = windows.front();
  const jobplan::ComputeSlot& slot = plan_.ranks[rank][w.slot];
  std::string cause;
  if (w.wait_peer >= 0) {
    cause = Format("waited %.3f s for %s", w.wait_ns * 1e-9, layout_.Name(layout_.AtPipelineRank(g, w.wait_peer)).c_str());
  } else {
    cause = "no input wait: the rank itself was late";
  }
  return MakeEvent(v1::BUBBLE, g, layout_, step,
                   Format("bubble: %s step %d: idle %.3f s before %s at +%.3f s into the step, predicted %.3f s "
                          "(limit +%.3f s); %s",
                          layout_.Name(g).c_str(), step, w.measured_s, ActionName(slot.action).c_str(), w.start_s,
                          w.predicted_s, limit, cause.c_str()));
}

}  // namespace pipecoord::coordinator::health
