// Interleaved 1F1B (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on
// GPU Clusters Using Megatron-LM"): v chunks per rank, chunk c of rank r is virtual stage
// c*p + r. Micro-batches go in groups: each rank runs a group's forwards through chunk 0, then
// chunk 1, ..., so a micro-batch comes back to rank 0 for its next chunk just as rank 0 needs
// it; backwards mirror that with the chunks reversed. Rank r warms up with
// (v-1)*G + 2(p-r-1) forwards (G the largest group), then alternates one forward and one
// backward, then cools down. Makespan with equal stages and no comm: m t + (p-1) t / v.
//
// Micro-batches that do not divide by p: the naive schedule (groups of p and a short last
// group) stalls in that last group, because a micro-batch returns to rank 0 for its next chunk
// before rank 0 has anything else to do. Here the q = floor(m/p) groups share the remainder
// evenly (sizes p + ceil or floor of (m%p)/q, larger groups first), so every group spans at
// least the pipeline: the bubble stays at the even case's (p-1) t / v, for one extra warm-up
// forward per chunk beyond the first on each rank (more activation memory: (v-1)*ceil((m%p)/q)
// chunk-units). docs/schedules.md compares both. With m < p there is one group of m.
#include <algorithm>

#include "schedules/generator.h"
#include "schedules/interleaved_order.h"

namespace pipecoord::schedules {

std::vector<int> InterleavedGroups(int pp, int microbatches) {
  const int q = microbatches / pp;
  if (q == 0) return {microbatches};
  std::vector<int> groups(q, microbatches / q);
  for (int i = 0; i < microbatches % q; ++i) ++groups[i];
  return groups;
}

std::vector<Action> InterleavedRankOrder(int pp, int vpp, int rank, const std::vector<int>& groups,
                                         Op backward) {
  struct Item {
    int chunk, mb;
  };
  std::vector<Item> fwd, bwd;
  int first = 0;
  for (int g : groups) {
    for (int c = 0; c < vpp; ++c) {
      for (int i = 0; i < g; ++i) fwd.push_back({c, first + i});
    }
    for (int c = vpp - 1; c >= 0; --c) {
      for (int i = 0; i < g; ++i) bwd.push_back({c, first + i});
    }
    first += g;
  }
  const int total = static_cast<int>(fwd.size());
  const int largest = *std::max_element(groups.begin(), groups.end());
  const int warmup = std::min(total, (vpp - 1) * largest + 2 * (pp - rank - 1));
  std::vector<Action> list;
  list.reserve(2 * total);
  int nf = 0, nb = 0;
  auto emit_f = [&] { list.push_back({Op::kF, fwd[nf].chunk * pp + rank, fwd[nf].mb}); ++nf; };
  auto emit_b = [&] { list.push_back({backward, bwd[nb].chunk * pp + rank, bwd[nb].mb}); ++nb; };
  while (nf < warmup) emit_f();
  while (nf < total) {
    emit_f();
    emit_b();
  }
  while (nb < total) emit_b();
  return list;
}

Result<Schedule> GenerateInterleaved(const ScheduleSpec& spec) {
  const int p = spec.pp, v = spec.vpp, m = spec.microbatches;
  Schedule s = MakeSchedule("interleaved", p, v, m, LoopedPlacement(p, v));
  const std::vector<int> groups = InterleavedGroups(p, m);
  for (int r = 0; r < p; ++r) s.ranks[r] = InterleavedRankOrder(p, v, r, groups, Op::kBW);
  return s;
}

}  // namespace pipecoord::schedules
