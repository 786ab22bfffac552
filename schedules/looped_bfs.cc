// Looped BFS (Lamy-Poirier 2023, "Breadth-First Pipeline Parallelism"; PyTorch's
// ScheduleLoopedBFS): v chunks per rank placed as in interleaved, and every micro-batch runs
// through chunk 0 before any runs chunk 1, and so on; backwards run the chunks in reverse, each
// for every micro-batch. It keeps all m micro-batches' activations (like GPipe) in exchange
// for long runs per chunk, which suit sharded data parallelism (fewer weight gathers).
#include "schedules/generator.h"

namespace pipecoord::schedules {

Result<Schedule> GenerateLoopedBfs(const ScheduleSpec& spec) {
  const int p = spec.pp, v = spec.vpp, m = spec.microbatches;
  Schedule s = MakeSchedule("looped-bfs", p, v, m, LoopedPlacement(p, v));
  for (int r = 0; r < p; ++r) {
    auto& list = s.ranks[r];
    list.reserve(2 * static_cast<size_t>(v) * m);
    for (int c = 0; c < v; ++c) {
      for (int mb = 0; mb < m; ++mb) list.push_back({Op::kF, c * p + r, mb});
    }
    for (int c = v - 1; c >= 0; --c) {
      for (int mb = 0; mb < m; ++mb) list.push_back({Op::kBW, c * p + r, mb});
    }
  }
  return s;
}

}  // namespace pipecoord::schedules
