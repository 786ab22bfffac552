#include "schedules/v_block_greedy.h"

#include <algorithm>
#include <array>
#include <string>
#include <tuple>

namespace pipecoord::schedules {
namespace {

// Pass types, per rank: the block's four, then the W's (one list, or one per chunk at the end).
enum Type { kFDown = 0, kFUp = 1, kBUp = 2, kBDown = 3, kW = 4, kWUp = 4, kWDown = 5 };

// slots[rank][type][mb]: the slot of that pass; each type's micro-batches in increasing slots.
using Slots = std::vector<std::vector<std::vector<int>>>;

struct Event {
  int slot, rank, type, mb;
  bool operator<(const Event& o) const {
    return std::tie(slot, rank, type, mb) < std::tie(o.slot, o.rank, o.type, o.mb);
  }
};

std::vector<Event> InSlotOrder(const Slots& slots) {
  std::vector<Event> events;
  for (size_t r = 0; r < slots.size(); ++r) {
    for (size_t t = 0; t < slots[r].size(); ++t) {
      for (size_t k = 0; k < slots[r][t].size(); ++k) {
        events.push_back({slots[r][t][k], static_cast<int>(r), static_cast<int>(t), static_cast<int>(k)});
      }
    }
  }
  std::sort(events.begin(), events.end());
  return events;
}

int LastSlot(const std::vector<std::vector<int>>& rank, int types) {
  int last = 0;
  for (int t = 0; t < types; ++t) last = std::max(last, rank[t].back());
  return last;
}

// Gives each B a W in the first free slot after it (oldest first), past the end when the rank
// has no free slot left. One W list, or (`per_chunk`) one per chunk with chunk 1's served first.
void PlaceWeights(std::vector<std::vector<int>>& rank, bool per_chunk) {
  const int last = LastSlot(rank, 4);
  std::vector<int> at(last + 1, -1);
  for (int t = 0; t < 4; ++t) {
    for (int s : rank[t]) at[s] = t;
  }
  rank.resize(per_chunk ? 6 : 5);
  int owed[2] = {0, 0};
  for (int s = 0; s <= last; ++s) {
    if (at[s] == kBUp || at[s] == kBDown) {
      ++owed[per_chunk ? at[s] - kBUp : 0];
    } else if (at[s] < 0) {
      for (int w = 0; w < 2; ++w) {
        if (owed[w] > 0) {
          rank[kW + w].push_back(s);
          --owed[w];
          break;
        }
      }
    }
  }
  int s = last;
  for (int w = 0; w < 2; ++w) {
    for (; owed[w] > 0; --owed[w]) rank[kW + w].push_back(++s);
  }
}

// Every pass as early as its inputs and its rank's previous pass allow, at unit cost, in slot
// order: the new slots.
Result<Slots> Compact(const Slots& slots) {
  const int p = static_cast<int>(slots.size());
  Slots start = slots;
  Slots done = slots;  // end slot once placed, -1 before
  for (auto& rank : done) {
    for (auto& type : rank) std::fill(type.begin(), type.end(), -1);
  }
  std::vector<int> free_from(p, 0);
  for (const Event& e : InSlotOrder(slots)) {
    const int r = e.rank, t = e.type, k = e.mb;
    int ready = free_from[r];
    bool missing = false;
    auto after = [&](int rank, int type, int mb) {
      const int end = done[rank][type][mb];
      if (end < 0) missing = true;
      ready = std::max(ready, end);
    };
    if ((t == kFDown || t == kBUp) && r > 0) after(r - 1, t, k);
    if ((t == kFUp || t == kBDown) && r + 1 < p) after(r + 1, t, k);
    if (t > 0 && t < 4) after(r, t - 1, k);
    if (k > 0) after(r, t, k - 1);
    if (missing) return Internal("V block (published construction): a pass comes before its input");
    start[r][t][k] = ready;
    done[r][t][k] = free_from[r] = ready + 1;
  }
  return start;
}

// The rank's activations their way: F's hold a chunk each; a placed W frees one; without placed
// W's (`implicit_w`) each free slot frees one while B's are owed their W's.
class RankMemory {
 public:
  RankMemory(const std::vector<std::vector<int>>& rank, int types, bool implicit_w, int length)
      : implicit_w_(implicit_w), at_(length, -1), live_(length), peak_(length), owed_(length) {
    for (int t = 0; t < types; ++t) {
      for (int s : rank[t]) at_[s] = t;
    }
    Replay(0);
  }

  // The peak as counted at construction (and after each move with implicit W's).
  int Peak() const { return at_.empty() ? 0 : peak_.back(); }

  // Moves the pass in slot `from` to the free slot `to` (< from) if the peak stays <= cap.
  bool MoveIfWithin(int from, int to, int cap) {
    const int type = at_[from];
    if (!implicit_w_) {  // only the slots in between change, by the pass's own delta
      const int d = Delta(type);
      for (int s = to; s < from && d > 0; ++s) {
        if (live_[s] + d > cap) return false;
      }
      for (int s = to; s < from; ++s) live_[s] += d;  // the peak stays <= cap, so peak_ goes stale
      std::swap(at_[from], at_[to]);
      return true;
    }
    std::swap(at_[from], at_[to]);
    Replay(to);
    if (Peak() <= cap) return true;
    std::swap(at_[from], at_[to]);
    Replay(to);
    return false;
  }

 private:
  static int Delta(int type) { return type == kFDown || type == kFUp ? 1 : type == kW ? -1 : 0; }

  // Recounts from slot `from` on.
  void Replay(int from) {
    int live = from > 0 ? live_[from - 1] : 0, peak = from > 0 ? peak_[from - 1] : 0;
    int owed = from > 0 ? owed_[from - 1] : 0;
    for (size_t s = from; s < at_.size(); ++s) {
      const int t = at_[s];
      if (t >= 0) {
        live += Delta(t);
        if (t == kBUp || t == kBDown) ++owed;
      } else if (implicit_w_ && owed > 0) {
        --live;
        --owed;
      }
      live_[s] = live;
      owed_[s] = owed;
      peak_[s] = peak = std::max(peak, live);
    }
  }

  bool implicit_w_;
  std::vector<int> at_;  // per slot: the pass type there, or -1
  std::vector<int> live_, peak_, owed_;
};

// The k-th B of the rank (either chunk) in slot order.
int KthB(const std::vector<std::vector<int>>& rank, int k) {
  const std::vector<int>& a = rank[kBUp];
  const std::vector<int>& b = rank[kBDown];
  size_t i = 0, j = 0;
  for (int n = 0;; ++n) {
    const bool take_a = j >= b.size() || (i < a.size() && a[i] < b[j]);
    const int slot = take_a ? a[i++] : b[j++];
    if (n == k) return slot;
  }
}

// One greedy round (see the header), then compaction. With `with_w` the W's are placed first
// and the warm-up moves too; without, only the cool-down moves and the W's are placed after.
Result<Slots> Reorder(Slots slots, bool with_w, int microbatches) {
  const int p = static_cast<int>(slots.size());
  const int types = with_w ? 5 : 4;
  if (with_w) {
    for (auto& rank : slots) PlaceWeights(rank, false);
  }
  std::vector<RankMemory> memory;
  std::vector<std::vector<char>> taken(p);
  int cap = 0;
  for (int r = 0; r < p; ++r) {
    const int length = LastSlot(slots[r], types) + 1;
    memory.emplace_back(slots[r], types, !with_w, length);
    cap = std::max(cap, memory.back().Peak());
    taken[r].assign(length, 0);
  }
  int phase = 0;  // 0 warm-up, 1 steady state (left alone), 2 cool-down
  for (const Event& e : InSlotOrder(slots)) {
    const int r = e.rank, t = e.type, k = e.mb, at = e.slot;
    if (t == kBDown && r == 0 && phase == 0) phase = 1;
    if (phase == 1 || (phase == 0 && !with_w)) {
      if (phase == 1 && t == kFDown && k == microbatches - 1) phase = 2;
      taken[r][at] = 1;
      continue;
    }
    int earliest = -1;
    if ((t == kFDown || t == kBUp) && r > 0) earliest = std::max(earliest, slots[r - 1][t][k]);
    if ((t == kFUp || t == kBDown) && r + 1 < p) earliest = std::max(earliest, slots[r + 1][t][k]);
    if (t > 0 && t < 4) earliest = std::max(earliest, slots[r][t - 1][k]);
    if (t == kW) earliest = std::max(earliest, KthB(slots[r], k));
    if (k > 0) earliest = std::max(earliest, slots[r][t][k - 1]);
    ++earliest;
    if (earliest > at) return Internal("V block (published construction): rank " + std::to_string(r) +
                                       ", a pass would run before its input");
    for (int s = earliest; s < at; ++s) {
      if (!taken[r][s] && memory[r].MoveIfWithin(at, s, cap)) {
        slots[r][t][k] = s;
        break;
      }
    }
    taken[r][slots[r][t][k]] = 1;
  }
  if (!with_w) {
    for (auto& rank : slots) PlaceWeights(rank, false);
  }
  return Compact(slots);
}

}  // namespace

Result<std::vector<std::vector<Action>>> GreedyVBlockOrders(int microbatches, const std::vector<VBlockRow>& block) {
  const int p = static_cast<int>(block.size());
  const int m = microbatches;
  Slots slots(p, std::vector<std::vector<int>>(4, std::vector<int>(m)));
  for (int r = 0; r < p; ++r) {
    const std::array<int, 4> row = {block[r].f_down, block[r].f_up, block[r].b_up, block[r].b_down};
    for (int t = 0; t < 4; ++t) {
      for (int k = 0; k < m; ++k) slots[r][t][k] = row[t] + kVBlockPeriod * k;
    }
  }
  auto first = Reorder(std::move(slots), true, m);
  if (!first.ok()) return first.status();
  for (auto& rank : *first) rank.resize(4);
  auto second = Reorder(std::move(first).value(), false, m);
  if (!second.ok()) return second.status();
  for (auto& rank : *second) {
    rank.resize(4);
    PlaceWeights(rank, true);
  }
  static constexpr Op kOps[6] = {Op::kF, Op::kF, Op::kB, Op::kB, Op::kW, Op::kW};
  static constexpr bool kUp[6] = {false, true, true, false, true, false};
  std::vector<std::vector<Action>> orders(p);
  for (int r = 0; r < p; ++r) {
    std::vector<std::tuple<int, int, int>> passes;  // slot, type, mb
    for (int t = 0; t < 6; ++t) {
      for (int k = 0; k < m; ++k) passes.emplace_back((*second)[r][t][k], t, k);
    }
    std::sort(passes.begin(), passes.end());
    for (const auto& [slot, t, k] : passes) orders[r].push_back({kOps[t], kUp[t] ? 2 * p - 1 - r : r, k});
  }
  return orders;
}

}  // namespace pipecoord::schedules
