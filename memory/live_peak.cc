#include "memory/live_peak.h"

namespace pipecoord::memory {

using schedules::Action;
using schedules::Op;

std::vector<LivePeak> PeakLiveActivations(const schedules::Schedule& s,
                                          const std::vector<StageBytes>& stages) {
  std::vector<LivePeak> peaks(s.pp);
  for (int r = 0; r < s.pp; ++r) {
    int64_t live = 0;
    int count = 0;
    LivePeak& p = peaks[r];
    const auto& list = s.ranks[r];
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (a.stage < 0 || a.stage >= static_cast<int>(stages.size())) continue;
      const StageBytes& sb = stages[a.stage];
      switch (a.op) {
        case Op::kF:
          live += sb.stored;
          ++count;
          break;
        case Op::kB:
          live += sb.kept_for_w - sb.stored;
          break;
        case Op::kW:
          live -= sb.kept_for_w;
          --count;
          break;
        case Op::kBW:
          live -= sb.stored;
          --count;
          break;
        default:
          continue;
      }
      if (live > p.bytes) {
        p.bytes = live;
        p.live_microbatches = count;
        p.action_index = static_cast<int>(i);
      }
    }
  }
  return peaks;
}

}  // namespace pipecoord::memory
