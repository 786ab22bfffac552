// zb-auto: the shortest zero-bubble schedule (vpp = 1, split backward) the memory-aware search
// finds under a per-rank activation limit (memory_search.h), after the Zero Bubble paper's
// automatic scheduling (Qi et al., ICLR 2024, section 3).
#include "schedules/generator.h"
#include "schedules/memory_search.h"

namespace pipecoord::schedules {

Result<Schedule> GenerateZbAuto(const ScheduleSpec& spec) {
  auto result = SearchZbAuto(spec);
  if (!result.ok()) return result.status();
  return std::move(result->schedule);
}

}  // namespace pipecoord::schedules
