#include "schedules/bubble_prediction.h"

#include <string>

namespace pipecoord::schedules {

Result<PredictedBubbles> PredictBubbles(std::string_view schedule, int p, int v, int m, double f,
                                        double b, double w) {
  const bool gpipe = schedule == "fthenb", one_f_one_b = schedule == "1f1b",
             interleaved = schedule == "interleaved";
  if (!gpipe && !one_f_one_b && !interleaved) {
    return FailedPrecondition("no closed form for schedule \"" + std::string(schedule) +
                              "\": use the simulator's idle windows");
  }
  if (p < 1 || v < 1 || m < p) {
    return FailedPrecondition("closed forms need pp >= 1, vpp >= 1 and microbatches >= pp");
  }
  if (interleaved && m % p != 0) {
    return FailedPrecondition("interleaved's closed form needs microbatches % pp == 0");
  }
  if (!interleaved && v != 1) return FailedPrecondition("vpp: " + std::string(schedule) + " has 1 chunk per rank");
  const double tf = f / v, tb = (b + w) / v;
  PredictedBubbles out;
  out.makespan = (m * v + p - 1) * (tf + tb);
  out.windows.resize(p);
  out.unplaced.assign(p, 0.0);
  for (int r = 0; r < p; ++r) {
    auto& win = out.windows[r];
    const int below = p - r - 1;  // ranks after this one
    if (r > 0) win.push_back({0, r * tf});
    const double end = out.makespan - r * tb;  // this rank's last backward ends here
    if (gpipe && below > 0) {
      const double fwd_end = (r + m) * tf;
      win.push_back({fwd_end, fwd_end + below * (tf + tb)});
    } else if (one_f_one_b && below > 0) {
      win.push_back({p * tf, p * tf + below * tb});
      for (int k = below; k >= 1; --k) {
        const double gap_end = end - k * tb - (k - 1) * tf;
        win.push_back({gap_end - tf, gap_end});
      }
    } else if (interleaved) {
      out.unplaced[r] = below * (tf + tb);
    }
    if (r > 0) win.push_back({end, out.makespan});
  }
  return out;
}

}  // namespace pipecoord::schedules
