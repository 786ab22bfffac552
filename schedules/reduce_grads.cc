#include "schedules/reduce_grads.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace pipecoord::schedules {

Schedule AddReduceGrads(Schedule s) {
  for (const auto& list : s.ranks) {
    for (const Action& a : list) {
      if (a.op == Op::kReduceGrad) return s;
    }
  }
  const int stages = s.num_stages();
  for (auto& list : s.ranks) {
    // (position of the stage's last W or BW, stage), latest first so insertions keep the
    // earlier positions valid.
    std::vector<int> last(stages, -1);
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].op == Op::kW || list[i].op == Op::kBW) last[list[i].stage] = static_cast<int>(i);
    }
    std::vector<std::pair<int, int>> at;
    for (int st = 0; st < stages; ++st) {
      if (last[st] >= 0) at.emplace_back(last[st], st);
    }
    std::sort(at.rbegin(), at.rend());
    for (const auto& [pos, st] : at) {
      Action reduce;
      reduce.op = Op::kReduceGrad;
      reduce.stage = st;
      reduce.mb = -1;
      reduce.peer = -1;
      list.insert(list.begin() + pos + 1, reduce);
    }
  }
  return s;
}

}  // namespace pipecoord::schedules
