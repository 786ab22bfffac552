#include "coordinator/health/hang_check.h"

#include <algorithm>

#include "coordinator/health/event_text.h"

namespace pipecoord::coordinator::health {

HangCheck::HangCheck(const jobplan::HealthSettings& settings, const RankLayout& layout, int steps, int64_t start_ns)
    : settings_(settings), layout_(layout), steps_(steps), ranks_(layout.world()) {
  for (RankState& r : ranks_) r.changed_ns = start_ns;
}

double HangCheck::Deadline(double predicted_step_s) const {
  if (predicted_step_s <= 0) return std::max(settings_.hang_floor_s, settings_.hang_startup_s);
  return std::max(settings_.hang_floor_s, settings_.hang_step_factor * predicted_step_s);
}

void HangCheck::Advance(int g, int64_t position, int64_t at_ns) {
  RankState& r = ranks_[g];
  if (position > r.position) {
    r.position = position;
    r.changed_ns = std::max(r.changed_ns, at_ns);
  }
}

void HangCheck::OnProgress(int g, const v1::Progress& p, int64_t now_ns) {
  if (g < 0 || g >= static_cast<int>(ranks_.size())) return;
  ranks_[g].last = p;
  ranks_[g].has_progress = true;
  const int64_t age_ns = std::max<int64_t>(0, p.progress_age_ns());  // a negative age is not from the future
  Advance(g, static_cast<int64_t>(p.step()) * 1'000'000 + p.action_index(), now_ns - age_ns);
}

void HangCheck::OnStepReported(int g, int step, int64_t now_ns) {
  if (g < 0 || g >= static_cast<int>(ranks_.size())) return;
  Advance(g, static_cast<int64_t>(step) * 1'000'000 + 999'999, now_ns);
  if (step >= steps_ - 1) ranks_[g].done = true;
}

std::optional<v1::HealthEvent> HangCheck::OnTick(int64_t now_ns, double predicted_step_s) {
  const double deadline = Deadline(predicted_step_s);
  int stalest = -1;
  double stalest_s = 0;
  for (int g = 0; g < static_cast<int>(ranks_.size()); ++g) {
    if (ranks_[g].done) continue;
    const double quiet = (now_ns - ranks_[g].changed_ns) * 1e-9;
    if (quiet > deadline && quiet > stalest_s) {
      stalest = g;
      stalest_s = quiet;
    }
  }
  if (stalest < 0) {
    flagged_ = false;
    return std::nullopt;
  }
  if (flagged_) return std::nullopt;
  flagged_ = true;
  // Follow the waits from the stalest rank to the one that waits for nobody.
  int stuck = stalest;
  for (size_t hops = 0; hops < ranks_.size(); ++hops) {
    const RankState& r = ranks_[stuck];
    if (!r.has_progress || !r.last.waiting() || r.last.wait_peer() < 0) break;
    stuck = layout_.AtPipelineRank(stuck, r.last.wait_peer());
  }
  std::string where;
  int step = -1;
  std::string listing;
  for (int g = 0; g < static_cast<int>(ranks_.size()); ++g) {
    const RankState& r = ranks_[g];
    std::string line;
    if (r.done) {
      line = layout_.Name(g) + " finished";
    } else if (!r.has_progress) {
      line = layout_.Name(g) + " reported nothing yet";
    } else {
      line = Format("%s step %d #%d %s %s", layout_.Name(g).c_str(), r.last.step(), r.last.action_index(),
                    ActionName(r.last.action()).c_str(),
                    r.last.waiting() ? ("waiting for " + layout_.Name(layout_.AtPipelineRank(g, r.last.wait_peer()))).c_str()
                                     : "running");
    }
    listing += (g ? "; " : "") + line;
  }
  const RankState& s = ranks_[stuck];
  if (s.has_progress) {
    step = s.last.step();
    where = Format(" at step %d in %s", step, ActionName(s.last.action()).c_str());
  }
  const std::string basis = predicted_step_s > 0
                                ? Format("max(floor %.2f s, %g x predicted step %.3f s)", settings_.hang_floor_s,
                                         settings_.hang_step_factor, predicted_step_s)
                                : Format("max(floor %.2f s, startup %.2f s)", settings_.hang_floor_s,
                                         settings_.hang_startup_s);
  return MakeEvent(v1::HANG, stuck, layout_, step,
                   Format("hang: %s is stuck%s: no progress for %.2f s (deadline %.2f s = %s); last actions: %s",
                          layout_.Name(stuck).c_str(), where.c_str(), stalest_s, deadline, basis.c_str(),
                          listing.c_str()));
}

}  // namespace pipecoord::coordinator::health
