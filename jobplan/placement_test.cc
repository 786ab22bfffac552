#include "jobplan/placement.h"

#include <gtest/gtest.h>

#include <set>

namespace pipecoord::jobplan {
namespace {

std::vector<FreeWorker> Workers(const std::vector<std::pair<std::string, int>>& hosts) {
  std::vector<FreeWorker> out;
  for (const auto& [host, n] : hosts) {
    for (int i = 0; i < n; ++i) out.push_back({host + "-w" + std::to_string(i), host});
  }
  return out;
}

// The hosts each tensor-parallel group landed on.
std::vector<std::set<std::string>> GroupHosts(const RankLayout& layout, const std::vector<FreeWorker>& free,
                                              const Placement& p) {
  std::vector<std::set<std::string>> out;
  for (int first = 0; first < layout.world(); first += layout.tp()) {
    std::set<std::string> hosts;
    for (int g = first; g < first + layout.tp(); ++g) hosts.insert(free[p.worker_of_rank[g]].host);
    out.push_back(hosts);
  }
  return out;
}

void ExpectEveryWorkerOnce(const Placement& p) {
  std::set<int> seen(p.worker_of_rank.begin(), p.worker_of_rank.end());
  EXPECT_EQ(seen.size(), p.worker_of_rank.size());
  EXPECT_EQ(seen.count(-1), 0u);
}

TEST(PlacementTest, EachTensorParallelGroupOnOneHost) {
  // Hosts listed interleaved, as a registry might: a group still gets one host.
  std::vector<FreeWorker> free;
  for (int i = 0; i < 4; ++i) {
    free.push_back({"a" + std::to_string(i), "host-a"});
    free.push_back({"b" + std::to_string(i), "host-b"});
  }
  const RankLayout layout = RankLayout::Create(2, 2, 2).value();
  auto p = PlaceRanks(layout, free);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ExpectEveryWorkerOnce(*p);
  for (const auto& hosts : GroupHosts(layout, free, *p)) EXPECT_EQ(hosts.size(), 1u);
  EXPECT_TRUE(p->split_groups.empty());
  EXPECT_EQ(p->Summary(layout), "tp groups on one host each (4 groups of 2 ranks)");
}

TEST(PlacementTest, AGroupThatFitsNowhereWholeIsSplitAndSaidSo) {
  const auto free = Workers({{"a", 1}, {"b", 1}, {"c", 2}});
  const RankLayout layout = RankLayout::Create(2, 1, 2).value();
  auto p = PlaceRanks(layout, free);
  ASSERT_TRUE(p.ok());
  ExpectEveryWorkerOnce(*p);
  const auto hosts = GroupHosts(layout, free, *p);
  EXPECT_EQ(hosts[0], (std::set<std::string>{"c"}));
  EXPECT_EQ(hosts[1], (std::set<std::string>{"a", "b"}));
  ASSERT_EQ(p->split_groups.size(), 1u);
  EXPECT_EQ(p->split_groups[0], "ranks 2-3 (rank 1 (dp 0, tp 0)): hosts a, b");
  EXPECT_EQ(p->Summary(layout), "1 of 2 tp groups span hosts (too few free workers on one host): "
                                "ranks 2-3 (rank 1 (dp 0, tp 0)): hosts a, b");
}

TEST(PlacementTest, LargestHostsFirstKeepRoomForWholeGroups) {
  // 4 groups of 2 onto hosts of 3, 3 and 2: taking the fullest host each time keeps every group
  // whole (a: 3 -> 1, b: 3 -> 1, c: 2 -> 0, then a group needs 2: split is unavoidable only if
  // the layout asks for more than fits).
  const auto free = Workers({{"a", 3}, {"b", 3}, {"c", 2}});
  const RankLayout layout = RankLayout::Create(3, 1, 2).value();
  auto p = PlaceRanks(layout, free);
  ASSERT_TRUE(p.ok());
  for (const auto& hosts : GroupHosts(layout, free, *p)) EXPECT_EQ(hosts.size(), 1u);
}

// Workers that reported no host are one host (""), not a split.
TEST(PlacementTest, WorkersWithoutAHostAreOneHost) {
  const auto free = Workers({{"", 4}});
  const RankLayout layout = RankLayout::Create(2, 1, 2).value();
  auto p = PlaceRanks(layout, free);
  ASSERT_TRUE(p.ok());
  ExpectEveryWorkerOnce(*p);
  EXPECT_TRUE(p->split_groups.empty());
}

TEST(PlacementTest, TooFewFreeWorkersIsFailedPrecondition) {
  auto p = PlaceRanks(RankLayout::Create(2, 2, 2).value(), Workers({{"a", 7}}));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(p.status().message(), "placing 8 ranks: only 7 free worker(s)");
}

TEST(PlacementTest, ARestartKeepsEachGroupsPreviousWorkers) {
  const auto free = Workers({{"a", 2}, {"b", 2}});
  const RankLayout layout = RankLayout::Create(2, 1, 2).value();
  // Before: group 0 on b, group 1 on a.
  auto p = PlaceRanks(layout, free, {"b-w0", "b-w1", "a-w1", "a-w0"});
  ASSERT_TRUE(p.ok());
  std::vector<std::string> ids;
  for (int i : p->worker_of_rank) ids.push_back(free[i].id);
  EXPECT_EQ(ids, (std::vector<std::string>{"b-w0", "b-w1", "a-w1", "a-w0"}));
  // Without tensor parallelism each rank keeps its worker too.
  auto q = PlaceRanks(RankLayout::Create(4, 1, 1).value(), free, {"a-w1", "b-w0", "", "a-w0"});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(free[q->worker_of_rank[0]].id, "a-w1");
  EXPECT_EQ(free[q->worker_of_rank[1]].id, "b-w0");
  EXPECT_EQ(free[q->worker_of_rank[3]].id, "a-w0");
  ExpectEveryWorkerOnce(*q);
  EXPECT_EQ(q->Summary(RankLayout::Create(4, 1, 1).value()), "");
}

}  // namespace
}  // namespace pipecoord::jobplan
