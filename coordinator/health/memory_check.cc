#include "coordinator/health/memory_check.h"

#include "coordinator/health/event_text.h"

namespace pipecoord::coordinator::health {

MemoryCheck::MemoryCheck(const jobplan::HealthSettings& settings, std::vector<uint64_t> budgets,
                         const RankLayout& layout)
    : settings_(settings), budgets_(std::move(budgets)), device_(layout.world(), 0), layout_(layout),
      flagged_(layout.world(), false) {}

void MemoryCheck::SetDeviceMemory(int g, uint64_t bytes) {
  if (g >= 0 && g < static_cast<int>(device_.size())) device_[g] = bytes;
}

uint64_t MemoryCheck::budget(int g) const {
  const int r = layout_.PipelineRank(g);
  return r < static_cast<int>(budgets_.size()) ? budgets_[r] : 0;
}

std::optional<v1::HealthEvent> MemoryCheck::OnStep(int g, int step, uint64_t peak) {
  if (g < 0 || g >= static_cast<int>(flagged_.size())) return std::nullopt;
  const uint64_t budget = this->budget(g);
  const uint64_t device = device_[g];
  const double near = settings_.memory_device_fraction * static_cast<double>(device);
  std::string what;
  if (budget > 0 && peak > budget) {
    what = Format("peak %s is over the plan's budget %s by %s", MiB(peak).c_str(), MiB(budget).c_str(),
                  MiB(peak - budget).c_str());
  } else if (device > 0 && static_cast<double>(peak) > near) {
    what = Format("peak %s is above %.0f%% of the device's %s", MiB(peak).c_str(),
                  settings_.memory_device_fraction * 100, MiB(device).c_str());
  }
  const bool was = flagged_[g];
  flagged_[g] = !what.empty();
  if (what.empty() || was) return std::nullopt;
  return MakeEvent(v1::MEMORY, g, layout_, step,
                   Format("memory: %s step %d: %s", layout_.Name(g).c_str(), step, what.c_str()));
}

}  // namespace pipecoord::coordinator::health
