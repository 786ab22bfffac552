#include "schedules/best_schedule.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedules/partition.h"
#include "schedules/validator.h"

namespace pipecoord::schedules {
namespace {

BestSpec Spec(int pp, int m, double mem_limit = 0) {
  BestSpec b;
  b.spec.pp = pp;
  b.spec.microbatches = m;
  b.spec.mem_limit = mem_limit;
  return b;
}

std::vector<std::string> Names(const BestResult& r) {
  std::vector<std::string> names;
  for (const BestCandidate& c : r.ranked) names.push_back(c.schedule);
  return names;
}

std::string Reason(const BestResult& r, const std::string& schedule) {
  for (const BestRefusal& f : r.refused) {
    if (f.schedule == schedule) return f.reason;
  }
  return "(not refused)";
}

// p = 4, m = 8, f = b = w = 1, no limit: every registered schedule fits; ZB-V's 25.5 is the
// shortest (v-auto and dualpipev tie on the makespan; ZB-V has the shorter rank span than
// dualpipev and comes before v-auto in the registry at the same span and peak).
TEST(BestScheduleTest, P4M8NoLimitZbvWins) {
  auto r = ChooseBestSchedule(Spec(4, 8));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Names(*r), (std::vector<std::string>{"zbv", "v-auto", "dualpipev", "v-half", "zbh2", "zbh1", "zb-auto",
                                                 "interleaved", "looped-bfs", "v-min", "1f1b", "eager-1f1b",
                                                 "fthenb"}));
  EXPECT_TRUE(r->refused.empty());
  const BestCandidate& w = r->ranked.front();
  EXPECT_EQ(w.makespan, 25.5);
  EXPECT_EQ(w.rank_span, 24);
  EXPECT_EQ(w.peak_activations, 4);
  EXPECT_EQ(w.vpp, 2);
  EXPECT_EQ(r->ranked[2].rank_span, 25.5);  // dualpipev: the same makespan, a longer rank span
  EXPECT_EQ(r->ranked[4].makespan, 27);     // zbh2: rank span 24 but makespan 27
  EXPECT_EQ(r->ranked[4].rank_span, 24);
  EXPECT_EQ(r->ranked.back().makespan, 33);  // fthenb: (m + p - 1) t
  // The winner comes back runnable: communication added, validated, simulated with the costs.
  EXPECT_EQ(r->schedule.name, "zbv");
  EXPECT_TRUE(r->schedule.HasCommunication());
  EXPECT_TRUE(Validate(r->schedule).ok());
  EXPECT_EQ(r->simulation.makespan, 25.5);
  EXPECT_TRUE(r->stage_layers.empty());
  for (size_t i = 1; i < r->ranked.size(); ++i) EXPECT_LE(r->ranked[i - 1].makespan, r->ranked[i].makespan);
}

// A limit of 3 micro-batches refuses everything at 1F1B's memory or above; V-Half (26.5, peak
// 3) wins, v-auto ties it and comes later in the registry; zb-auto trades time for memory (31).
TEST(BestScheduleTest, TightLimitPicksAnotherWinner) {
  auto r = ChooseBestSchedule(Spec(4, 8, 3));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Names(*r), (std::vector<std::string>{"v-half", "v-auto", "v-min", "zb-auto"}));
  EXPECT_EQ(r->ranked[0].makespan, 26.5);
  EXPECT_EQ(r->ranked[0].peak_activations, 3);
  EXPECT_EQ(r->ranked[3].makespan, 31);
  for (const BestCandidate& c : r->ranked) EXPECT_LE(c.peak_activations, 3) << c.schedule;
  for (const RankStats& st : r->simulation.ranks) EXPECT_LE(st.peak_activations, 3);
  EXPECT_EQ(r->refused.size(), 9u);
  EXPECT_EQ(Reason(*r, "zbv"), "peak activations 4 on rank 0, above the memory limit 3");
  EXPECT_EQ(Reason(*r, "zbh2"), "peak activations 7 on rank 0, above the memory limit 3");
  EXPECT_EQ(r->schedule.name, "v-half");

  // Limit 2: only V-Min's order (and v-auto's, as long) fits.
  r = ChooseBestSchedule(Spec(4, 8, 2));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Names(*r), (std::vector<std::string>{"v-min", "v-auto", "zb-auto"}));
  EXPECT_EQ(r->ranked[0].makespan, 29.5);
}

TEST(BestScheduleTest, SchedulesThatRefuseTheShapeAreListed) {
  auto r = ChooseBestSchedule(Spec(4, 4));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Reason(*r, "dualpipev"), "microbatches: dualpipev needs at least 2 x pp = 8 micro-batches, got 4");
  EXPECT_EQ(r->ranked.front().schedule, "zbv");
  EXPECT_EQ(r->ranked.front().makespan, 13.5);

  // A given vpp keeps only the schedules that place that many chunks.
  BestSpec v2 = Spec(4, 8);
  v2.spec.vpp = 2;
  r = ChooseBestSchedule(v2);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Names(*r), (std::vector<std::string>{"zbv", "v-auto", "dualpipev", "v-half", "interleaved", "looped-bfs",
                                                 "v-min"}));
  EXPECT_EQ(Reason(*r, "fthenb"), "vpp: schedule fthenb places exactly 1 chunk(s) per rank, got 2");
  EXPECT_EQ(Reason(*r, "zb-auto"), "vpp: schedule zb-auto places exactly 1 chunk(s) per rank, got 2");
}

// The layers are placed on each schedule's own stages: 4 layers cannot fill the 8 stages of a
// two-chunk schedule, so the flat ones compete and ZB-H2 (makespan 27, first by its rank span) wins.
TEST(BestScheduleTest, LayerPlacementPerSchedule) {
  BestSpec b = Spec(4, 8);
  b.place_layers = [](const std::vector<int>& stage_to_rank) {
    return PartitionLayers(4, 4, stage_to_rank);
  };
  auto r = ChooseBestSchedule(b);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Names(*r), (std::vector<std::string>{"zbh2", "zbh1", "zb-auto", "1f1b", "eager-1f1b", "fthenb"}));
  EXPECT_EQ(r->ranked[0].makespan, 27);
  EXPECT_EQ(Reason(*r, "zbv"), "--layers: must be >= the 8 stages (a layer for each), got 4");
  EXPECT_EQ(r->stage_layers, (std::vector<int>{1, 1, 1, 1}));

  // Uneven layers change the costs each schedule is simulated with (stage fractions).
  b.place_layers = [](const std::vector<int>& stage_to_rank) {
    return PartitionLayers(24, 4, stage_to_rank, {9, 5, 5, 5});
  };
  r = ChooseBestSchedule(b);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ranked.size(), 13u);
  EXPECT_FALSE(r->costs.stage_fraction.empty());
  auto again = Simulate(r->schedule, r->costs);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->makespan, r->ranked[0].makespan);
  EXPECT_GT(r->ranked[0].makespan, 25.5);  // the 9-layer rank is the bottleneck
}

TEST(BestScheduleTest, NothingFitsSaysWhyForEach) {
  auto r = ChooseBestSchedule(Spec(4, 8, 0.5));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ranked.empty());
  EXPECT_EQ(r->refused.size(), 13u);
  const std::string msg = BestFailure(*r, 0.5);
  EXPECT_EQ(msg.rfind("no schedule runs this shape within the memory limit 0.5: fthenb: peak activations 8 on rank "
                      "0, above the memory limit 0.5; 1f1b: ",
                      0),
            0u)
      << msg;
  EXPECT_NE(msg.find("; zb-auto: mem-limit (--mem-limit): must be >= 1"), std::string::npos) << msg;
  EXPECT_EQ(BestFailure(*r, 0.5, [](const std::string&) { return std::string("x"); }).substr(0, 72),
            "no schedule runs this shape within the memory limit 0.5: fthenb: x; 1f1b");
}

TEST(BestScheduleTest, BadInputIsRefusedOnce) {
  EXPECT_EQ(ChooseBestSchedule(Spec(0, 8)).status().message(), "pp: must be >= 1, got 0");
  EXPECT_EQ(ChooseBestSchedule(Spec(4, 0)).status().message(), "microbatches: must be >= 1, got 0");
  BestSpec b = Spec(4, 8);
  b.spec.costs.f = -1;
  EXPECT_EQ(ChooseBestSchedule(b).status().message(), "cost-f: must be a finite number >= 0, got -1");
  b = Spec(4, 8);
  b.spec.costs.stage_fraction = {1, 1, 1, 1};
  EXPECT_EQ(ChooseBestSchedule(b).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ChooseBestSchedule(Spec(4, 8, -1)).status().message(), "mem-limit: must be >= 0, got -1");
}

TEST(BestScheduleTest, RankingAsJson) {
  auto r = ChooseBestSchedule(Spec(2, 2));
  ASSERT_TRUE(r.ok());
  const std::string json = BestRankingToJson(*r, 0);
  EXPECT_EQ(json.substr(0, 69), "{\"measure\": \"makespan\", \"mem_limit\": 0, \"winner\": \"zbv\",\n    \"ranked\"");
  EXPECT_NE(json.find("{\"schedule\": \"zbv\", \"vpp\": 2, \"makespan\": 6.5, \"rank_span\": 6.5, \"bubble_rate\": "
                      "0.07692307692307687, \"peak_activations\": 2, \"peak_rank\": 1}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"refused\": [\n      {\"schedule\": \"dualpipev\", \"reason\": \"microbatches: dualpipev needs "
                      "at least 2 x pp = 4 micro-batches, got 2\"}\n    ]\n  }"),
            std::string::npos)
      << json;
}

}  // namespace
}  // namespace pipecoord::schedules
