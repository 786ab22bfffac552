// PipelineRankAggregate against values computed here from its inputs: per rank as they come in a
// small job; the highest memory, the lowest scores and the mean idle split per pipeline rank above
// kPerRankSeriesMaxRanks ranks.
#include "coordinator/health/metrics_aggregate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace pipecoord::coordinator::health {
namespace {

// The last value the sink got for each (kind, rank, dp, tp, op).
struct RecordingSink final : MetricsSink {
  using Key = std::tuple<std::string, int, int, int, std::string>;
  std::map<Key, std::vector<double>> last;
  int calls = 0;
  void Put(const std::string& kind, const RankLabel& at, const std::string& op, std::vector<double> v) {
    last[{kind, at.rank, at.dp, at.tp, op}] = std::move(v);
    ++calls;
  }
  void Action(const std::string&, const RankLabel&, int, const std::string&, double) override {}
  void Step(const std::string&, double, double, double) override {}
  void Idle(const std::string&, const RankLabel& at, double a, double b, double c, double d) override {
    Put("idle", at, "", {a, b, c, d});
  }
  void Predicted(const std::string&, double, double, double, double) override {}
  void Straggler(const std::string&, const RankLabel& at, const std::string& op, double rel, double ind) override {
    Put("straggler", at, op, {rel, ind});
  }
  void Memory(const std::string&, const RankLabel& at, uint64_t peak, uint64_t budget, uint64_t reserved) override {
    Put("memory", at, "", {double(peak), double(budget), double(reserved)});
  }
  void Event(const std::string&, const std::string&) override {}
  void ForgetJob(const std::string&) override {}
};

TEST(PipelineRankAggregateTest, ASmallJobsGaugesGoThroughPerRank) {
  RecordingSink sink;
  const RankLayout layout = RankLayout::OfDegrees(/*pp=*/2, /*dp=*/2, /*tp=*/2);
  PipelineRankAggregate agg(layout, "job", &sink);
  ASSERT_TRUE(agg.per_rank());
  for (int g = 0; g < layout.world(); ++g) agg.Memory(g, 0, 100 + g, 1000, 200 + g);
  EXPECT_EQ(sink.calls, layout.world());
  const RankLabel at = LabelOf(layout, 5);
  EXPECT_EQ(sink.last.at({"memory", at.rank, at.dp, at.tp, ""}), (std::vector<double>{105, 1000, 205}));
  agg.AddStraggler(3, "F", 0.5, 0.25);
  const RankLabel s = LabelOf(layout, 3);
  EXPECT_EQ(sink.last.at({"straggler", s.rank, s.dp, s.tp, "F"}), (std::vector<double>{0.5, 0.25}));
}

TEST(PipelineRankAggregateTest, ABigJobsGaugesAreOnePerPipelineRank) {
  RecordingSink sink;
  const RankLayout layout = RankLayout::OfDegrees(/*pp=*/4, /*dp=*/64, /*tp=*/4);
  ASSERT_GT(layout.world(), kPerRankSeriesMaxRanks);
  PipelineRankAggregate agg(layout, "job", &sink);
  ASSERT_FALSE(agg.per_rank());

  // Memory: step 3 from every rank, then step 4 from the first half only, then a late step 3.
  auto peak = [](int g, int step) { return uint64_t(1000 + (g * 7919) % 997 + step); };
  for (int g = 0; g < layout.world(); ++g) agg.Memory(g, 3, peak(g, 3), 5000, 2 * peak(g, 3));
  for (int g = 0; g < layout.world() / 2; ++g) agg.Memory(g, 4, peak(g, 4), 5000, 2 * peak(g, 4));
  agg.Memory(layout.world() - 1, 3, 999999, 5000, 999999);  // older than what rank's series shows
  for (int r = 0; r < layout.pp(); ++r) {
    uint64_t want = 0;
    for (int g = 0; g < layout.world() / 2; ++g) {
      if (layout.PipelineRank(g) == r) want = std::max(want, peak(g, 4));
    }
    EXPECT_EQ(sink.last.at({"memory", r, -1, -1, ""}), (std::vector<double>{double(want), 5000, double(2 * want)}))
        << "pipeline rank " << r;
  }

  // Straggler scores: the lowest per pipeline rank and kind.
  for (int g = 0; g < layout.world(); ++g) {
    agg.AddStraggler(g, "F", 0.9 - 0.001 * (g % 50), 1.0 - 0.002 * (g % 30));
    agg.AddStraggler(g, "B", 0.95, g == 37 ? 0.1 : 0.99);
  }
  const int before = sink.calls;
  agg.FlushStraggler();
  EXPECT_EQ(sink.calls - before, 2 * layout.pp());
  for (int r = 0; r < layout.pp(); ++r) {
    EXPECT_NEAR(sink.last.at({"straggler", r, -1, -1, "F"})[0], 0.9 - 0.001 * 49, 1e-12);
    EXPECT_NEAR(sink.last.at({"straggler", r, -1, -1, "F"})[1], 1.0 - 0.002 * 29, 1e-12);
    EXPECT_EQ(sink.last.at({"straggler", r, -1, -1, "B"})[1], r == layout.PipelineRank(37) ? 0.1 : 0.99);
  }

  // Idle: the mean per pipeline rank of one step's split.
  std::map<int, std::vector<double>> sum;
  std::map<int, int> n;
  for (int g = 0; g < layout.world(); ++g) {
    const RankLabel at = LabelOf(layout, g);
    const std::vector<double> v{0.001 * g, 0.002, -0.0001 * (g % 3), 0.5 * at.rank};
    agg.AddIdle(at, v[0], v[1], v[2], v[3]);
    auto& s = sum[at.rank];
    s.resize(4);
    for (int k = 0; k < 4; ++k) s[k] += v[k];
    ++n[at.rank];
  }
  agg.FlushIdle();
  for (int r = 0; r < layout.pp(); ++r) {
    const std::vector<double>& got = sink.last.at({"idle", r, -1, -1, ""});
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(got[k], sum[r][k] / n[r], 1e-12) << "rank " << r << " cause " << k;
  }
  // Nothing per rank ever reached the sink.
  for (const auto& [key, v] : sink.last) EXPECT_EQ(std::get<2>(key), -1);
}

TEST(PipelineRankAggregateTest, NoSinkNoCalls) {
  PipelineRankAggregate agg(RankLayout::OfDegrees(4, 256, 1), "job", nullptr);
  agg.Memory(0, 0, 1, 2, 3);
  agg.AddIdle({0, 0, -1}, 1, 2, 3, 4);
  agg.FlushIdle();
  agg.AddStraggler(0, "F", 1, 1);
  agg.FlushStraggler();
}

}  // namespace
}  // namespace pipecoord::coordinator::health
