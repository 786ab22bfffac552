#include "schedules/text_grid.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace pipecoord::schedules {
namespace {

constexpr int kMaxColumns = 2000;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.resize(width, ' ');
  return s;
}

std::string RightTrim(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

std::string ScheduleToTextGrid(const Schedule& s, const Simulation& sim) {
  const double eps = 1e-9 * std::max(1.0, sim.makespan);
  auto timing = [&](int r, size_t i) {
    const bool ok = static_cast<size_t>(r) < sim.timing.size() && i < sim.timing[r].size();
    return ok ? sim.timing[r][i] : Interval{};
  };
  // Column width in time: the shortest compute action, coarser if the grid would be too wide.
  double res = 0;
  for (int r = 0; r < s.pp; ++r) {
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const Interval t = timing(r, i);
      if (IsCompute(s.ranks[r][i].op) && t.end - t.start > eps) {
        res = res == 0 ? t.end - t.start : std::min(res, t.end - t.start);
      }
    }
  }
  if (res <= 0) res = 1;
  int cols = static_cast<int>(std::ceil(sim.makespan / res - 1e-6));
  if (cols > kMaxColumns) {
    res = sim.makespan / kMaxColumns;
    cols = kMaxColumns;
  }
  cols = std::max(cols, 0);

  // Labels, and each rank's chunk index of every stage (model order).
  std::vector<int> chunk(s.num_stages(), 0);
  std::vector<int> seen(s.pp, 0);
  for (int k = 0; k < s.num_stages(); ++k) {
    const int r = s.stage_to_rank[k];
    if (r >= 0 && r < s.pp) chunk[k] = seen[r]++;
  }
  auto label = [&](const Action& a) {
    std::string l = std::string(OpName(a.op)) + std::to_string(a.mb);
    if (s.vpp > 1 && a.stage >= 0 && a.stage < s.num_stages()) l += "." + std::to_string(chunk[a.stage]);
    return l;
  };
  size_t width = std::to_string(std::max(cols - 1, 0)).size();
  for (const auto& list : s.ranks) {
    for (const Action& a : list) {
      if (IsCompute(a.op)) width = std::max(width, label(a).size());
    }
  }
  width += 1;

  const std::string unit = res == 1 ? "1 time unit" : Num(res) + " time units";
  std::string out = s.name + "  p=" + std::to_string(s.pp) + " v=" + std::to_string(s.vpp) +
                    " m=" + std::to_string(s.microbatches) + "  makespan " + Num(sim.makespan) +
                    " time units  bubble rate " + Num(std::round(sim.bubble_rate * 1000) / 10) +
                    "%  (1 column = " + unit + ")\n";
  const size_t margin = std::string("rank " + std::to_string(std::max(s.pp - 1, 0))).size() + 2;
  std::string ruler = Pad("time", margin);
  for (int c = 0; c < cols; ++c) ruler += Pad(std::to_string(c), width);
  out += RightTrim(ruler) + "\n";
  for (int r = 0; r < s.pp; ++r) {
    std::vector<std::string> cells(cols, ".");
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const Action& a = s.ranks[r][i];
      const Interval t = timing(r, i);
      if (!IsCompute(a.op) || t.end - t.start <= eps) continue;
      const int c0 = std::clamp(static_cast<int>(std::lround(t.start / res)), 0, std::max(cols - 1, 0));
      const int c1 = std::clamp(static_cast<int>(std::lround(t.end / res)), c0 + 1, cols);
      if (c0 >= cols) continue;
      cells[c0] = label(a);
      for (int c = c0 + 1; c < c1; ++c) cells[c] = std::string(width - 1, '-');
    }
    std::string line = Pad("rank " + std::to_string(r), margin);
    for (const std::string& cell : cells) line += Pad(cell, width);
    out += RightTrim(line) + "\n";
  }
  out += "F forward, B input-gradient backward, W weight-gradient backward, BW full backward, "
         ". idle\n";
  return out;
}

}  // namespace pipecoord::schedules
