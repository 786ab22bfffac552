// RankRun::TensorPeers, the ranks a device backend connects its transport to, on the plans of
// several schedule families, data and tensor parallelism: it names every rank the job list sends
// to or receives from, every all-reduce ring neighbour and every tensor-parallel ring neighbour
// (the group's collectives run on that transport), nothing else, and the relation is symmetric
// (NCCL's Connect needs both ends of a pair to list each other).
#include "worker/daemon/rank_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "common/rank_layout.h"
#include "jobplan/assignment.h"
#include "jobplan/layout.h"
#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "jobplan/tiny_spec_for_tests.h"

namespace pipecoord::worker {
namespace {

struct Case {
  std::string schedule;
  int pp, vpp, dp, tp = 1;
};

class TensorPeersTest : public ::testing::TestWithParam<Case> {};

TEST_P(TensorPeersTest, EveryExchangeAndOnlyThoseBothWays) {
  const Case& c = GetParam();
  v1::JobSpec raw = jobplan::TinySpec(c.pp, c.schedule);
  raw.set_vpp(c.vpp);
  raw.set_dp(c.dp);
  raw.set_tp(c.tp);
  raw.mutable_model()->set_layers(8);
  ASSERT_TRUE(jobplan::ValidateJobSpec(raw).ok()) << jobplan::ValidateJobSpec(raw).ToString();
  const v1::JobSpec spec = jobplan::WithDefaults(raw);
  auto plan = jobplan::PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const RankLayout layout = jobplan::LayoutOf(spec);
  const int world = layout.world();
  std::vector<std::string> endpoints;
  for (int g = 0; g < world; ++g) endpoints.push_back("127.0.0.1:" + std::to_string(30000 + g));
  std::vector<std::set<int>> peers(world);
  for (int g = 0; g < world; ++g) {
    const v1::Assignment a = jobplan::BuildAssignment("job", spec, *plan, g, endpoints, 1);
    ASSERT_EQ(RankRun::GlobalRank(a), g);
    const std::vector<int> got = RankRun::TensorPeers(a);
    EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
    peers[g] = std::set<int>(got.begin(), got.end());
    EXPECT_EQ(peers[g].size(), got.size()) << "a peer listed twice";
    // What the job list exchanges, and the all-reduce ring.
    // Written out from the layout's rule (global = (dp_rank pp + rank) tp + tp_rank).
    auto global = [&](int rank, int dp_rank, int tp_rank) { return (dp_rank * c.pp + rank) * c.tp + tp_rank; };
    std::set<int> want;
    for (const v1::Action& act : a.jobs().actions()) {
      const bool comm = act.op() == v1::SEND_F || act.op() == v1::SEND_B || act.op() == v1::RECV_F || act.op() == v1::RECV_B;
      if (comm) want.insert(global(act.peer(), a.dp_rank(), a.tp_rank()));
    }
    if (c.dp > 1) {
      want.insert(global(a.rank(), (a.dp_rank() + 1) % c.dp, a.tp_rank()));
      want.insert(global(a.rank(), (a.dp_rank() + c.dp - 1) % c.dp, a.tp_rank()));
    }
    if (c.tp > 1) {
      want.insert(global(a.rank(), a.dp_rank(), (a.tp_rank() + 1) % c.tp));
      want.insert(global(a.rank(), a.dp_rank(), (a.tp_rank() + c.tp - 1) % c.tp));
    }
    EXPECT_EQ(peers[g], want) << "global rank " << g;
    EXPECT_EQ(peers[g].count(g), 0u);
  }
  for (int g = 0; g < world; ++g) {
    for (int h : peers[g]) EXPECT_EQ(peers[h].count(g), 1u) << g << " lists " << h << " but not the other way";
  }
}

INSTANTIATE_TEST_SUITE_P(Plans, TensorPeersTest,
                         ::testing::Values(Case{"1f1b", 1, 0, 1}, Case{"1f1b", 4, 0, 1}, Case{"interleaved", 2, 2, 1},
                                           Case{"zbv", 2, 2, 1}, Case{"1f1b", 2, 0, 2}, Case{"1f1b", 1, 0, 3},
                                           Case{"zbh1", 3, 0, 3}, Case{"1f1b", 2, 0, 2, 2}, Case{"zbv", 2, 2, 1, 4},
                                           Case{"1f1b", 1, 0, 3, 4}),
                         [](const auto& info) {
                           std::string n = info.param.schedule + "_pp" + std::to_string(info.param.pp) + "_vpp" +
                                           std::to_string(info.param.vpp) + "_dp" + std::to_string(info.param.dp) +
                                           "_tp" + std::to_string(info.param.tp);
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace pipecoord::worker
