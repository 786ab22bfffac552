#include "cli/best_text.h"

#include <algorithm>
#include <cstdio>

namespace pipecoord::cli {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string Rate(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", r);
  return buf;
}

std::string Name(const v1::BestScheduleChoice& c) { return c.schedule() + " (vpp " + std::to_string(c.vpp()) + ")"; }

}  // namespace

std::string BestScheduleText(const v1::BestScheduleReport& r, int runners_up) {
  if (r.ranked_size() == 0) return "";
  const v1::BestScheduleChoice& w = r.ranked(0);
  std::string out = "best      chose " + Name(w) + ": makespan " + Num(w.predicted_makespan()) + " cost units, bubble " +
                    Rate(w.predicted_bubble_rate()) + ", peak " + Num(w.peak_activations()) + " micro-batches\n";
  const int shown = std::min(r.ranked_size() - 1, std::max(0, runners_up));
  for (int k = 1; k <= shown; ++k) {
    const v1::BestScheduleChoice& c = r.ranked(k);
    out += "runner-up " + Name(c) + ": makespan " + Num(c.predicted_makespan()) + ", bubble " +
           Rate(c.predicted_bubble_rate()) + ", peak " + Num(c.peak_activations()) + "\n";
  }
  if (r.ranked_size() - 1 > shown) {
    out += "          ... and " + std::to_string(r.ranked_size() - 1 - shown) + " more (--format json lists them)\n";
  }
  if (r.refused_size() > 0) {
    out += "refused   " + std::to_string(r.refused_size()) +
           (r.mem_limit() > 0 ? " within memLimit " + Num(r.mem_limit()) : std::string()) + ": ";
    for (int k = 0; k < r.refused_size(); ++k) out += (k > 0 ? "; " : "") + r.refused(k);
    out += "\n";
  }
  return out;
}

}  // namespace pipecoord::cli
