// v-auto: the shortest V schedule (two chunks per rank in a V, split backward) the
// memory-aware search finds under a per-rank activation limit (memory_search.h), after the
// controllable-memory V schedules (Qi et al. 2024, "Pipeline Parallelism with Controllable
// Memory"): ZB-V's order at 1F1B's memory, V-Half's and V-Min's below it, and the list
// scheduler's schedules in between and beyond.
#include "schedules/generator.h"
#include "schedules/memory_search.h"

namespace pipecoord::schedules {

Result<Schedule> GenerateVAuto(const ScheduleSpec& spec) {
  auto result = SearchVAuto(spec);
  if (!result.ok()) return result.status();
  return std::move(result->schedule);
}

}  // namespace pipecoord::schedules
