#include "schedules/comm_pass.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "schedules/dependencies.h"
#include "schedules/simulator.h"

namespace pipecoord::schedules {
namespace {

// A transfer's place in the global order: when its producer ends, then who and where.
using Key = std::tuple<double, int, int>;

struct PendingRecv {
  Key key;
  Action action;
};

}  // namespace

Result<Schedule> AddCommunication(const Schedule& in, const CostModel& costs) {
  if (in.HasCommunication()) {
    return FailedPrecondition("schedule \"" + in.name + "\" already has communication actions");
  }
  // Every action must take some time, or a producer and the transfer it starts could tie.
  CostModel ordering = costs;
  const double floor = 1e-6 * std::max(1e-9, costs.f + costs.b + costs.w);
  ordering.f = std::max(costs.f, floor);
  ordering.b = std::max(costs.b, floor);
  ordering.w = std::max(costs.w, floor);
  auto sim = Simulate(in, ordering);
  if (!sim.ok()) return sim.status();

  const int stages = in.num_stages();
  const int mbs = in.microbatches;
  // Where each result was produced, to give a receive the key of its send.
  std::vector<Key> produced(2 * static_cast<size_t>(stages) * mbs);
  auto slot_key = [&](Slot slot, int stage, int mb) -> Key& {
    return produced[(slot == kFwd ? 0 : 1) * static_cast<size_t>(stages) * mbs +
                    static_cast<size_t>(stage) * mbs + mb];
  };
  // When each action's results leave its rank: its end, or for the two halves of an
  // OVERLAP_F_B the slot's end (both are sent after the whole slot).
  auto leaves = [&](int r, size_t i) {
    const auto& list = in.ranks[r];
    if (i >= 1 && list[i - 1].op == Op::kOverlapFB) return sim->timing[r][i + 1].end;
    if (i >= 2 && list[i - 2].op == Op::kOverlapFB) return sim->timing[r][i].end;
    return sim->timing[r][i].end;
  };
  for (int r = 0; r < in.pp; ++r) {
    for (size_t i = 0; i < in.ranks[r].size(); ++i) {
      const Action& a = in.ranks[r][i];
      Slot filled[2];
      int n = Fills(a, filled);
      for (int k = 0; k < n; ++k) {
        if (filled[k] != kWeight) {
          slot_key(filled[k], a.stage, a.mb) = Key{leaves(r, i), r, static_cast<int>(i)};
        }
      }
    }
  }

  Schedule out = in;
  for (int r = 0; r < in.pp; ++r) {
    const auto& list = in.ranks[r];
    std::vector<PendingRecv> recvs;
    for (const Action& a : list) {
      SlotRef deps[2];
      int n = Producers(a, stages, deps);
      for (int k = 0; k < n; ++k) {
        const int from = in.stage_to_rank[deps[k].stage];
        if (from == r || deps[k].slot == kWeight) continue;
        const Op op = deps[k].slot == kFwd ? Op::kRecvF : Op::kRecvB;
        recvs.push_back({slot_key(deps[k].slot, deps[k].stage, a.mb), Action{op, a.stage, a.mb, from}});
      }
    }
    std::sort(recvs.begin(), recvs.end(),
              [](const PendingRecv& x, const PendingRecv& y) { return x.key < y.key; });

    std::vector<Action>& result = out.ranks[r];
    result.clear();
    result.reserve(list.size() + 2 * recvs.size());
    size_t next = 0;
    auto send_of = [&](const Action& a) {
      const int target = SendTarget(a, stages);
      if (target >= 0 && in.stage_to_rank[target] != r) {
        result.push_back(Action{a.op == Op::kF ? Op::kSendF : Op::kSendB, a.stage, a.mb,
                                in.stage_to_rank[target]});
      }
    };
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      // An OVERLAP_F_B slot is one unit: its receives before it, its two sends after it.
      const bool slot = a.op == Op::kOverlapFB;
      const size_t key_at = slot ? i + 1 : i;
      const Key mine{leaves(r, key_at), r, static_cast<int>(key_at)};
      while (next < recvs.size() && recvs[next].key < mine) result.push_back(recvs[next++].action);
      if (slot) {
        result.insert(result.end(), {a, list[i + 1], list[i + 2]});
        send_of(list[i + 1]);
        send_of(list[i + 2]);
        i += 2;
        continue;
      }
      result.push_back(a);
      send_of(a);
    }
    while (next < recvs.size()) result.push_back(recvs[next++].action);
  }
  return out;
}

}  // namespace pipecoord::schedules
