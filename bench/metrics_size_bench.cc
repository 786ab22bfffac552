// The /metrics page of one big job: every rank's action histograms (F, B, W of its stage), idle
// split, straggler scores and memory, as the coordinator feeds its Prometheus exporter, serialized
// once with the gauges per rank (the baseline: the coordinator before they were folded) and once
// as the monitor sends them (health::PipelineRankAggregate: per pipeline rank above 512 ranks).
//   bazel run //bench:metrics_size_bench -- [--pp=8] [--dp=512] [--tp=1]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "coordinator/health/metrics_aggregate.h"
#include "coordinator/http/prometheus_metrics.h"

namespace {

using pipecoord::RankLayout;
using namespace pipecoord::coordinator;

int Flag(int argc, char** argv, const char* name, int fallback) {
  const size_t n = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return std::atoi(argv[i] + n + 1);
  }
  return fallback;
}

// One step of every rank's metrics; `folded`: through the aggregate, else straight per rank.
size_t PageBytes(const RankLayout& layout, bool folded, double* seconds) {
  http::PrometheusMetrics m;
  const std::string job = "job-000001";
  const auto start = std::chrono::steady_clock::now();
  health::PipelineRankAggregate agg(layout, job, &m);
  for (int g = 0; g < layout.world(); ++g) {
    const health::RankLabel at = health::LabelOf(layout, g);
    for (const char* op : {"F", "B", "W"}) {
      m.Action(job, health::ActionLabelOf(layout, g), at.rank, op, 0.001 * (1 + g % 7));
    }
    const double idle[4] = {0.01, 0.002 * (g % 3), -0.0001, 0.0005};
    if (folded) {
      agg.Memory(g, 0, 1000000 + g, 2000000, 1500000);
      agg.AddIdle(at, idle[0], idle[1], idle[2], idle[3]);
      for (const char* op : {"F", "B", "W"}) agg.AddStraggler(g, op, 0.9, 0.95);
    } else {
      m.Memory(job, at, 1000000 + g, 2000000, 1500000);
      m.Idle(job, at, idle[0], idle[1], idle[2], idle[3]);
      for (const char* op : {"F", "B", "W"}) m.Straggler(job, at, op, 0.9, 0.95);
    }
  }
  agg.FlushIdle();
  agg.FlushStraggler();
  const size_t bytes = m.Serialize().size();
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  const RankLayout layout = RankLayout::OfDegrees(Flag(argc, argv, "--pp", 8), Flag(argc, argv, "--dp", 512),
                                                  Flag(argc, argv, "--tp", 1));
  double per_rank_s = 0, folded_s = 0;
  const size_t per_rank = PageBytes(layout, false, &per_rank_s);
  const size_t folded = PageBytes(layout, true, &folded_s);
  std::printf("job of %d ranks (pp %d, dp %d, tp %d), one step of metrics:\n", layout.world(), layout.pp(),
              layout.dp(), layout.tp());
  std::printf("  baseline, gauges per rank:          /metrics %10zu B (%.2f MiB), fed and serialized in %.3f s\n",
              per_rank, per_rank / 1048576.0, per_rank_s);
  std::printf("  gauges per pipeline rank (folded):  /metrics %10zu B (%.2f MiB), fed and serialized in %.3f s\n",
              folded, folded / 1048576.0, folded_s);
  std::printf("  ratio folded / baseline: bytes %.4f, time %.3f\n", static_cast<double>(folded) / per_rank,
              folded_s / per_rank_s);
  return 0;
}
