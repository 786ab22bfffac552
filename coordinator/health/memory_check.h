// Memory check: each rank's reported peak of a step against the plan's budget for that rank
// (Plan.memory_budget_bytes, see memory_budget.h) and against memory_device_fraction of the
// device memory its worker registered with (skipped when it registered none). One MEMORY event
// per rank and episode.
#ifndef PIPECOORD_COORDINATOR_HEALTH_MEMORY_CHECK_H_
#define PIPECOORD_COORDINATOR_HEALTH_MEMORY_CHECK_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "common/rank_layout.h"
#include "jobplan/health_settings.h"
#include "proto/health.pb.h"

namespace pipecoord::coordinator::health {

class MemoryCheck {
 public:
  // budgets: per pipeline rank (0: none).
  MemoryCheck(const jobplan::HealthSettings& settings, std::vector<uint64_t> budgets, const RankLayout& layout);
  void SetDeviceMemory(int global_rank, uint64_t bytes);
  std::optional<v1::HealthEvent> OnStep(int global_rank, int step, uint64_t peak_bytes);
  uint64_t budget(int global_rank) const;

 private:
  jobplan::HealthSettings settings_;
  std::vector<uint64_t> budgets_, device_;
  RankLayout layout_;
  std::vector<bool> flagged_;
};

}  // namespace pipecoord::coordinator::health

#endif  // PIPECOORD_COORDINATOR_HEALTH_MEMORY_CHECK_H_
