#include "common/rank_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

namespace pipecoord {
namespace {

// The layout's rule written out independently: enumerate the grid with tp innermost, then pp,
// then dp, numbering ranks as they come.
struct Enumerated {
  std::vector<RankCoords> coords;
  Enumerated(int pp, int dp, int tp) {
    for (int d = 0; d < dp; ++d)
      for (int p = 0; p < pp; ++p)
        for (int t = 0; t < tp; ++t) coords.push_back({p, d, t});
  }
};

TEST(RankLayout, GlobalAndCoordsFollowTheGridOrder) {
  for (auto [pp, dp, tp] : {std::tuple{1, 1, 1}, {4, 1, 1}, {2, 3, 1}, {2, 2, 2}, {3, 2, 4}, {1, 5, 2}}) {
    const RankLayout layout = RankLayout::Create(pp, dp, tp).value();
    const Enumerated e(pp, dp, tp);
    ASSERT_EQ(layout.world(), static_cast<int>(e.coords.size()));
    for (int g = 0; g < layout.world(); ++g) {
      EXPECT_EQ(layout.Coords(g), e.coords[g]) << g;
      EXPECT_EQ(layout.Global(e.coords[g]), g);
      EXPECT_EQ(layout.PipelineRank(g), e.coords[g].pp);
      EXPECT_EQ(layout.DataRank(g), e.coords[g].dp);
      EXPECT_EQ(layout.TensorRank(g), e.coords[g].tp);
    }
  }
}

TEST(RankLayout, WithTpOneItIsTheOldPipelineTimesReplicaNumbering) {
  const RankLayout layout = RankLayout::Create(4, 3).value();
  for (int d = 0; d < 3; ++d)
    for (int r = 0; r < 4; ++r) EXPECT_EQ(layout.Global({r, d, 0}), d * 4 + r);
}

TEST(RankLayout, GroupsHoldTheRanksThatDifferInOneCoordinate) {
  const RankLayout layout = RankLayout::Create(3, 2, 4).value();
  const Enumerated e(3, 2, 4);
  for (int g = 0; g < layout.world(); ++g) {
    const RankCoords c = e.coords[g];
    std::vector<int> tp, dp, pp;
    for (int o = 0; o < layout.world(); ++o) {
      const RankCoords x = e.coords[o];
      if (x.pp == c.pp && x.dp == c.dp) tp.push_back(o);
      if (x.pp == c.pp && x.tp == c.tp) dp.push_back(o);
      if (x.dp == c.dp && x.tp == c.tp) pp.push_back(o);
    }
    EXPECT_EQ(layout.TensorGroup(g), tp) << g;
    EXPECT_EQ(layout.DataGroup(g), dp) << g;
    EXPECT_EQ(layout.PipelineGroup(g), pp) << g;
    EXPECT_EQ(layout.TensorGroup(g)[c.tp], g);
    EXPECT_EQ(layout.DataGroup(g)[c.dp], g);
    EXPECT_EQ(layout.PipelineGroup(g)[c.pp], g);
  }
  // A tensor-parallel group is a run of neighbours (one host).
  EXPECT_EQ(layout.TensorGroup(13), (std::vector<int>{12, 13, 14, 15}));
  EXPECT_EQ(layout.AtPipelineRank(13, 2), 21);  // 13 is (pp 0, dp 1, tp 1); 21 is (pp 2, dp 1, tp 1)
  EXPECT_EQ(layout.AtDataRank(13, 0), 1);       // (pp 0, dp 0, tp 1)
}

TEST(RankLayout, NamesKeepTheOldTextWithoutTensorParallelism) {
  EXPECT_EQ(RankLayout::Create(4, 2).value().Name(5), "rank 1 (dp 1)");
  EXPECT_EQ(RankLayout::Create(2, 2, 2).value().Name(5), "rank 0 (dp 1, tp 1)");
  EXPECT_EQ(RankLayout::Create(2, 2, 2).value().Name(-1), "the job");
}

TEST(RankLayout, RefusesDegreesBelowOneNamingThem) {
  for (auto [pp, dp, tp, name] : {std::tuple{0, 1, 1, "pp"}, {1, -2, 1, "dp"}, {1, 1, 0, "tp"}}) {
    auto r = RankLayout::Create(pp, dp, tp);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind(std::string(name) + " must be >= 1", 0), 0u) << r.status().message();
  }
  EXPECT_FALSE(RankLayout::Create(65536, 65536, 2).ok());
  EXPECT_EQ(RankLayout::OfDegrees(2, 0, 0), RankLayout::Create(2, 1, 1).value());
}

TEST(RankLayout, ContainsAndValid) {
  const RankLayout layout = RankLayout::Create(2, 2, 2).value();
  EXPECT_TRUE(layout.Contains(7));
  EXPECT_FALSE(layout.Contains(8));
  EXPECT_FALSE(layout.Contains(-1));
  EXPECT_TRUE(layout.Valid({1, 1, 1}));
  EXPECT_FALSE(layout.Valid({2, 0, 0}));
  EXPECT_FALSE(layout.Valid({0, 0, -1}));
}

// A rank's data plane reaches every rank a collective or a pipeline send of the job makes it talk
// to (the members of its three groups, its neighbours on its replica's ring, as
// worker/parallel/collectives.h's ring pairs them), the relation is symmetric (both ends of a link
// expect it: one dials, the other waits), and it stays pp + dp + tp - 1 at most.
TEST(RankLayout, DataPlanePeersCoverEveryExchangeBothWays) {
  for (auto [pp, dp, tp] : {std::tuple{1, 1, 1}, {2, 1, 1}, {1, 3, 1}, {1, 1, 4}, {4, 2, 1}, {2, 2, 2}, {3, 4, 2}, {8, 3, 4},
                            {16, 64, 8}}) {
    const RankLayout l = RankLayout::Create(pp, dp, tp).value();
    const int n = l.world();
    std::vector<std::vector<int>> peers(n);
    for (int g = 0; g < n; ++g) peers[g] = l.DataPlanePeers(g);
    auto linked = [&](int a, int b) { return std::binary_search(peers[a].begin(), peers[a].end(), b); };
    // The rings of a group in member order: each member talks to the next.
    auto ring = [&](const std::vector<int>& members) {
      for (size_t i = 0; members.size() > 1 && i < members.size(); ++i) {
        const int a = members[i], b = members[(i + 1) % members.size()];
        ASSERT_TRUE(linked(a, b) && linked(b, a)) << pp << "x" << dp << "x" << tp << ": " << a << " - " << b;
      }
    };
    for (int d = 0; d < dp; ++d) {
      std::vector<int> replica;
      for (int g = 0; g < n; ++g) {
        if (l.DataRank(g) == d) replica.push_back(g);
      }
      for (int g : replica) EXPECT_EQ(l.ReplicaGroup(g), replica);
      ring(replica);
    }
    for (int g = 0; g < n; ++g) {
      EXPECT_TRUE(std::is_sorted(peers[g].begin(), peers[g].end()));
      EXPECT_LE(static_cast<int>(peers[g].size()), pp + dp + tp - 1);
      EXPECT_FALSE(linked(g, g));
      for (const std::vector<int>& group : {l.PipelineGroup(g), l.DataGroup(g), l.TensorGroup(g)}) {
        for (int q : group) EXPECT_TRUE(q == g || linked(g, q)) << g << " -> " << q;
      }
      for (int q : peers[g]) EXPECT_TRUE(linked(q, g)) << "asymmetric: " << g << " -> " << q;
    }
  }
}

}  // namespace
}  // namespace pipecoord
