// Prints, for each PP,DP,TP argument, every global rank of common/rank_layout.h's layout with its
// coordinates, groups and name, one JSON object a line; tests/rank_layout/compare.py checks that
// python/pipecoord/rank_layout.py gives the same.
#include <cstdio>
#include <string>
#include <vector>

#include "common/rank_layout.h"

namespace {

std::string List(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

int main(int argc, char** argv) {
  using pipecoord::RankLayout;
  for (int i = 1; i < argc; ++i) {
    int pp = 0, dp = 0, tp = 0;
    if (std::sscanf(argv[i], "%d,%d,%d", &pp, &dp, &tp) != 3) {
      std::fprintf(stderr, "rank_layout_dump: %s: want PP,DP,TP\n", argv[i]);
      return 2;
    }
    auto layout = RankLayout::Create(pp, dp, tp);
    if (!layout.ok()) {
      std::printf("{\"layout\":[%d,%d,%d],\"error\":\"%s\"}\n", pp, dp, tp, layout.status().message().c_str());
      continue;
    }
    for (int g = 0; g < layout->world(); ++g) {
      const auto c = layout->Coords(g);
      std::printf("{\"layout\":[%d,%d,%d],\"g\":%d,\"coords\":[%d,%d,%d],\"tensor\":%s,\"data\":%s,\"pipeline\":%s,"
                  "\"name\":\"%s\"}\n",
                  pp, dp, tp, g, c.pp, c.dp, c.tp, List(layout->TensorGroup(g)).c_str(),
                  List(layout->DataGroup(g)).c_str(), List(layout->PipelineGroup(g)).c_str(), layout->Name(g).c_str());
    }
  }
  return 0;
}
