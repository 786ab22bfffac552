#include "jobplan/placement.h"

#include <algorithm>
#include <map>
#include <set>

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
  // Free workers by host, in the order given (stable), and which are still unused.
  std::map<std::string, std::vector<int>> by_host;
  for (int i = 0; i < static_cast<int>(free.size()); ++i) by_host[free[i].host].push_back(i);
  std::vector<bool> used(free.size(), false);
  auto left_on = [&](const std::string& host) {
    int n = 0;
    for (int i : by_host[host]) n += used[i] ? 0 : 1;
    return n;
  };
  auto index_of = [&](const std::string& id) {
    for (int i = 0; i < static_cast<int>(free.size()); ++i) {
      if (free[i].id == id) return i;
    }
    return -1;
  };
  Placement p;
  p.worker_of_rank.assign(world, -1);
  // A restart first: each group's previous workers, if all are free and on one host (before any
  // other group is placed, so none takes them).
  for (int first = 0; first < world; first += tp) {
    std::vector<int> kept;
    std::set<std::string> kept_hosts;
    for (int g = first; g < first + tp && g < static_cast<int>(previous.size()); ++g) {
      const int i = index_of(previous[g]);
      if (i >= 0 && !used[i]) {
        kept.push_back(i);
        kept_hosts.insert(free[i].host);
      }
    }
    if (static_cast<int>(kept.size()) != tp || kept_hosts.size() != 1) continue;
    for (int t = 0; t < tp; ++t) {
      p.worker_of_rank[first + t] = kept[t];
      used[kept[t]] = true;
    }
  }
  for (int first = 0; first < world; first += tp) {
    if (p.worker_of_rank[first] >= 0) continue;
    // The host with the most free workers that holds the whole group (ties: name order).
    std::string host;
    int best = 0;
    for (const auto& [h, workers] : by_host) {
      const int n = left_on(h);
      if (n >= tp && n > best) {
        best = n;
        host = h;
      }
    }
    std::vector<int> take;
    if (!host.empty()) {
      for (int i : by_host[host]) {
        if (!used[i] && static_cast<int>(take.size()) < tp) take.push_back(i);
      }
    } else {
      std::set<std::string> hosts;
      for (auto& [h, workers] : by_host) {
        for (int i : workers) {
          if (!used[i] && static_cast<int>(take.size()) < tp) {
            take.push_back(i);
            hosts.insert(h);
          }
        }
      }
      std::string names;
      for (const std::string& h : hosts) names += (names.empty() ? "" : ", ") + h;
      p.split_groups.push_back("ranks " + std::to_string(first) + "-" + std::to_string(first + tp - 1) + " (" +
                               layout.Name(first) + "): hosts " + names);
    }
    for (int t = 0; t < tp; ++t) {
      p.worker_of_rank[first + t] = take[t];
      used[take[t]] = true;
    }
  }
  return p;
}

}  // namespace pipecoord::jobplan
