#include "schedules/partition.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

namespace pipecoord::schedules {

Result<std::vector<int>> PartitionLayers(int layers, int pp, const std::vector<int>& stage_to_rank,
                                         const std::vector<int>& rank_layers, const PartitionFields& fields) {
  if (pp < 1) return InvalidArgument(fields.pp + ": must be >= 1, got " + std::to_string(pp));
  if (layers < 1) return InvalidArgument(fields.layers + ": must be >= 1, got " + std::to_string(layers));
  std::vector<int> per_rank = rank_layers;
  if (per_rank.empty()) {
    per_rank.assign(pp, layers / pp);
    for (int r = 0; r < layers % pp; ++r) ++per_rank[r];
  } else {
    if (static_cast<int>(per_rank.size()) != pp) {
      return InvalidArgument(fields.rank_layers + ": must have one count per rank (" + fields.pp + " = " +
                             std::to_string(pp) + "), got " + std::to_string(per_rank.size()));
    }
    long long sum = 0;
    for (int n : per_rank) sum += n;
    if (sum != layers) {
      return InvalidArgument(fields.rank_layers + ": counts must sum to " + fields.layers + " (" +
                             std::to_string(layers) + "), got " + std::to_string(sum));
    }
  }
  const int stages = static_cast<int>(stage_to_rank.size());
  if (rank_layers.empty() && layers < stages) {
    return InvalidArgument(fields.layers + ": must be >= the " + std::to_string(stages) +
                           " stages (a layer for each), got " + std::to_string(layers));
  }
  std::vector<int> chunks(pp, 0);
  for (int r : stage_to_rank) ++chunks[r];
  for (int r = 0; r < pp; ++r) {
    if (per_rank[r] >= chunks[r]) continue;
    const std::string need = std::to_string(chunks[r]) + " (a layer for each of rank " + std::to_string(r) + "'s " +
                             std::to_string(chunks[r]) + " chunk(s)), got " + std::to_string(per_rank[r]);
    if (rank_layers.empty()) {  // an even split short of a rank with more chunks than the others
      return InvalidArgument(fields.layers + ": rank " + std::to_string(r) + "'s share must be >= " + need);
    }
    return InvalidArgument(fields.rank_layers + "[" + std::to_string(r) + "]: must be >= " + need);
  }
  std::vector<int> dealt(pp, 0);  // chunks of each rank seen so far, in model order
  std::vector<int> out(stage_to_rank.size());
  for (size_t k = 0; k < stage_to_rank.size(); ++k) {
    const int r = stage_to_rank[k];
    const int c = dealt[r]++;
    out[k] = per_rank[r] / chunks[r] + (c < per_rank[r] % chunks[r] ? 1 : 0);
  }
  return out;
}

Result<std::vector<int>> BalanceLayers(const std::vector<double>& layer_costs, double embedding_cost,
                                       double head_cost, int num_stages) {
  const int n = static_cast<int>(layer_costs.size());
  if (num_stages < 1) return InvalidArgument("stages: must be >= 1");
  if (n < num_stages) {
    return InvalidArgument("layers: " + std::to_string(n) + " layer(s) cannot fill " +
                           std::to_string(num_stages) + " stages with at least one each");
  }
  for (double c : layer_costs) {
    if (!(c >= 0)) return InvalidArgument("layer costs: must be >= 0");
  }
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + layer_costs[i];
  auto cost = [&](int stage, int from, int to) {  // blocks [from, to) on `stage`
    double c = prefix[to] - prefix[from];
    if (stage == 0) c += embedding_cost;
    if (stage == num_stages - 1) c += head_cost;
    return c;
  };
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][i]: the least possible max-stage cost placing blocks [0, i) on stages [0, k).
  std::vector<std::vector<double>> best(num_stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(num_stages + 1, std::vector<int>(n + 1, -1));
  best[0][0] = 0;
  for (int k = 1; k <= num_stages; ++k) {
    for (int i = k; i <= n - (num_stages - k); ++i) {
      for (int j = k - 1; j < i; ++j) {
        if (best[k - 1][j] == inf) continue;
        double v = std::max(best[k - 1][j], cost(k - 1, j, i));
        if (v < best[k][i]) {
          best[k][i] = v;
          cut[k][i] = j;
        }
      }
    }
  }
  std::vector<int> out(num_stages);
  for (int k = num_stages, i = n; k > 0; --k) {
    const int j = cut[k][i];
    out[k - 1] = i - j;
    i = j;
  }
  return out;
}

std::vector<double> StageCostsOf(const std::vector<int>& stage_layers,
                                 const std::vector<double>& layer_costs, double embedding_cost,
                                 double head_cost) {
  std::vector<double> out(stage_layers.size(), 0.0);
  size_t next = 0;
  for (size_t k = 0; k < stage_layers.size(); ++k) {
    for (int i = 0; i < stage_layers[k] && next < layer_costs.size(); ++i) out[k] += layer_costs[next++];
  }
  if (!out.empty()) {
    out.front() += embedding_cost;
    out.back() += head_cost;
  }
  return out;
}

std::vector<double> StageFractions(const std::vector<double>& stage_costs, int pp) {
  const double total = std::accumulate(stage_costs.begin(), stage_costs.end(), 0.0);
  std::vector<double> out(stage_costs.size(), 0.0);
  if (total <= 0) return out;
  for (size_t k = 0; k < stage_costs.size(); ++k) out[k] = stage_costs[k] * pp / total;
  return out;
}

}  // namespace pipecoord::schedules
