#include "jobplan/placement.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace pipecoord::jobplan {

std::string Placement::Summary(const RankLayout& layout) const {
  if (layout.tp() == 1) return "";
  const int groups = layout.world() / layout.tp();
  if (split_groups.empty()) {
    return "tp groups on one host each (" + std::to_string(groups) + " groups of " + std::to_string(layout.tp()) + " ranks)";
  }
  std::string s = std::to_string(split_groups.size()) + " of " + std::to_string(groups) +
                  " tp groups span hosts (too few free workers on one host): ";
  for (size_t i = 0; i < split_groups.size(); ++i) s += (i ? "; " : "") + split_groups[i];
  return s;
}

Result<Placement> PlaceRanks(const RankLayout& layout, const std::vector<FreeWorker>& free,
                             const std::vector<std::string>& previous) {
  const int world = layout.world(), tp = layout.tp();
  if (static_cast<int>(free.size()) < world) {
    return FailedPrecondition("placing " + std::to_string(world) + " ranks: only " + std::to_string(free.size()) +
                              " free worker(s)");
  }
  // Linear in the workers (plus hosts x groups with tp > 1): the coordinator places a job of
  // thousands of ranks under its lock.
  std::unordered_map<std::string, int> index;  // worker id -> position in `free`
  for (int i = 0; i < static_cast<int>(free.size()); ++i) index.emplace(free[i].id, i);
  struct Host {
    std::vector<int> workers;  // positions in `free`, in the order given
    size_t next = 0;           // workers before it are used
    int left = 0;              // unused workers
  };
  std::map<std::string, Host> hosts;  // name order: ties between hosts go to the first name
  for (int i = 0; i < static_cast<int>(free.size()); ++i) {
    Host& h = hosts[free[i].host];
    h.workers.push_back(i);
    ++h.left;
  }
  std::vector<bool> used(free.size(), false);
  auto use = [&](int i) {
    used[i] = true;
    --hosts[free[i].host].left;
  };
  auto take_from = [&](Host& h) {  // the host's first unused worker
    while (used[h.workers[h.next]]) ++h.next;
    const int i = h.workers[h.next];
    use(i);
    return i;
  };
  Placement p;
  p.worker_of_rank.assign(world, -1);
  // A restart first: each group's previous workers, if all are free and on one host (before any
  // other group is placed, so none takes them).
  for (int first = 0; first < world; first += tp) {
    std::vector<int> kept;
    for (int g = first; g < first + tp && g < static_cast<int>(previous.size()); ++g) {
      auto it = index.find(previous[g]);
      if (it != index.end() && !used[it->second] &&
          (kept.empty() || free[it->second].host == free[kept.front()].host)) {
        kept.push_back(it->second);
      }
    }
    if (static_cast<int>(kept.size()) != tp) continue;
    for (int t = 0; t < tp; ++t) {
      p.worker_of_rank[first + t] = kept[t];
      use(kept[t]);
    }
  }
  size_t cursor = 0;  // tp 1: the free workers in the order given
  for (int first = 0; first < world; first += tp) {
    if (p.worker_of_rank[first] >= 0) continue;
    if (tp == 1) {
      while (used[cursor]) ++cursor;
      p.worker_of_rank[first] = static_cast<int>(cursor);
      use(static_cast<int>(cursor));
      continue;
    }
    // The host with the most free workers that holds the whole group.
    Host* best = nullptr;
    for (auto& [name, h] : hosts) {
      if (h.left >= tp && (best == nullptr || h.left > best->left)) best = &h;
    }
    if (best != nullptr) {
      for (int t = 0; t < tp; ++t) p.worker_of_rank[first + t] = take_from(*best);
      continue;
    }
    // No host holds it whole: the remaining workers in host order, and the split said.
    std::string names;
    int t = 0;
    for (auto& [name, h] : hosts) {
      if (h.left == 0 || t == tp) continue;
      names += (names.empty() ? "" : ", ") + name;
      while (h.left > 0 && t < tp) p.worker_of_rank[first + t++] = take_from(h);
    }
    p.split_groups.push_back("ranks " + std::to_string(first) + "-" + std::to_string(first + tp - 1) + " (" +
                             layout.Name(first) + "): hosts " + names);
  }
  return p;
}

}  // namespace pipecoord::jobplan
