#include "planner/planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <string>
#include <thread>

#include "memory/estimate.h"
#include "memory/presets.h"
#include "memory/units.h"
#include "planner/schedule_cache.h"
#include "schedules/registry.h"

namespace pipecoord::planner {
namespace {

memory::ModelSpec Llama7b() { return *memory::FindModelPreset("llama2-7b"); }

ClusterSpec Cluster(int gpus, int gib) {
  ClusterSpec c;
  c.gpus = gpus;
  c.gpu_memory_bytes = int64_t{gib} << 30;
  return c;
}

SearchSpace Small() {
  SearchSpace s;
  s.global_batch = 64;
  s.schedules = {"1f1b", "fthenb"};
  return s;
}

TEST(PlannerTest, MemoryAgreesWithTheAnalyticModel) {
  PlanOptions o;
  o.top_k = 1000;
  auto res = Plan(Llama7b(), Cluster(16, 80), Small(), o);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_GT(res->top.size(), 20u);
  for (const Candidate& c : res->top) {
    memory::TrainingSpec t;
    t.dp = c.shape.dp;
    t.tp = c.shape.tp;
    t.sp = c.shape.sp;
    t.pp = c.shape.pp;
    t.vpp = c.shape.vpp;
    t.zero = c.shape.zero;
    t.recompute = c.shape.recompute;
    t.micro_batch = c.shape.micro_batch;
    t.microbatches = c.shape.microbatches;
    t.schedule = c.schedule == kNoSchedule ? kNoScheduleEngine : c.schedule;
    auto rep = memory::EstimateMemory(Llama7b(), t);
    ASSERT_TRUE(rep.ok()) << rep.status().ToString();
    const memory::RankMemory& worst = rep->Tightest();
    EXPECT_EQ(c.peak_bytes, worst.peak_bytes) << c.schedule;
    EXPECT_EQ(c.tightest_rank, worst.rank);
    EXPECT_EQ(c.activations_bytes, worst.activations_bytes);
    EXPECT_EQ(c.params_bytes, worst.states.params);
    EXPECT_LE(c.peak_bytes, int64_t{80} << 30);
  }
  // Fastest first.
  for (size_t i = 1; i < res->top.size(); ++i) EXPECT_LE(res->top[i - 1].time.total_s, res->top[i].time.total_s);
}

TEST(PlannerTest, EveryCandidateIsCountedOnce) {
  auto res = Plan(Llama7b(), Cluster(16, 24), Small());
  ASSERT_TRUE(res.ok());
  int64_t pruned = 0;
  for (const PrunedReason& p : res->pruned) pruned += p.count;
  EXPECT_EQ(pruned + res->feasible, res->candidates);
  // 16 GPUs: tp in {1, 2, 4, 8, 16}; pp divides 16/tp; sp doubles tp > 1; 2 schedules (one
  // plan without a schedule at pp 1) x 5 micro-batch sizes x 4 ZeRO stages x 3 recompute policies.
  int64_t expected = 0;
  for (int tp : {1, 2, 4, 8, 16}) {
    int variants = 0;
    for (int pp = 1; pp <= 16 / tp; ++pp) {
      if ((16 / tp) % pp == 0) variants += pp == 1 ? 1 : 2;
    }
    expected += variants * (tp > 1 ? 2 : 1) * 5 * 4 * 3;
  }
  EXPECT_EQ(res->candidates, expected);
  std::map<std::string, int64_t> by_reason;
  for (const PrunedReason& p : res->pruned) by_reason[p.reason] = p.count;
  EXPECT_GT(by_reason["memory over budget"], 0);
  EXPECT_GT(by_reason["tp larger than gpus per node (tensor parallelism across nodes)"], 0);
  EXPECT_GT(by_reason["dp x micro-batch must divide the global batch"], 0);
  EXPECT_GT(by_reason["ZeRO needs dp > 1 (same as ZeRO-0)"], 0);
}

// The strategy a plan stands for: its schedule only counts with a pipeline (pp > 1).
std::string Strategy(const Candidate& c) {
  const StrategyShape& s = c.shape;
  return "dp " + std::to_string(s.dp) + " tp " + std::to_string(s.tp) + (s.sp ? "+sp" : "") + " pp " +
         std::to_string(s.pp) + " vpp " + std::to_string(s.vpp) + " " + (s.pp > 1 ? c.schedule : "") + " mb " +
         std::to_string(s.micro_batch) + " zero " + std::to_string(s.zero) + " recompute " +
         memory::RecomputeName(s.recompute);
}

TEST(PlannerTest, NoTwoPlansAreTheSameStrategy) {
  // llama3-8b on 32 GPUs: the fastest plans are pp 1, once listed under every schedule name.
  SearchSpace s;
  s.global_batch = 512;
  PlanOptions o;
  o.top_k = 200;
  auto res = Plan(*memory::FindModelPreset("llama3-8b"), Cluster(32, 80), s, o);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_EQ(res->top.size(), 200u);
  EXPECT_EQ(res->top[0].shape.pp, 1);
  std::map<std::string, int> seen;
  int pp1 = 0;
  for (size_t i = 0; i < res->top.size(); ++i) {
    const Candidate& c = res->top[i];
    EXPECT_TRUE(seen.emplace(Strategy(c), static_cast<int>(i)).second)
        << "#" << i + 1 << " repeats #" << seen[Strategy(c)] + 1 << ": " << Strategy(c) << " (" << c.schedule << ")";
    if (c.shape.pp == 1) {
      ++pp1;
      EXPECT_EQ(c.schedule, "none");
      EXPECT_EQ(c.shape.vpp, 1);
      EXPECT_EQ(c.shape.bubble_rate, 0);
    } else {
      EXPECT_NE(c.schedule, "none");
    }
  }
  EXPECT_GT(pp1, 0);
}

TEST(PlannerTest, CacheChangesNothingButSpeed) {
  SearchSpace s = Small();
  s.micro_batches = {1, 2};
  PlanOptions on, off;
  on.top_k = off.top_k = 50;
  off.cache_schedules = false;
  auto a = Plan(Llama7b(), Cluster(8, 40), s, on);
  auto b = Plan(Llama7b(), Cluster(8, 40), s, off);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->top.size(), b->top.size());
  for (size_t i = 0; i < a->top.size(); ++i) {
    EXPECT_EQ(a->top[i].peak_bytes, b->top[i].peak_bytes);
    EXPECT_DOUBLE_EQ(a->top[i].time.total_s, b->top[i].time.total_s);
  }
  EXPECT_GT(a->schedule_cache_hits, 0);
  EXPECT_EQ(b->schedule_cache_hits, 0);
  EXPECT_GT(b->schedule_profiles, a->schedule_profiles);
}

// The fields a candidate is ranked and shown by.
std::string Key(const Candidate& c) {
  const StrategyShape& x = c.shape;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s dp %d tp %d sp %d pp %d vpp %d mb %d m %d zero %d rc %d: %.17g s %lld B",
                c.schedule.c_str(), x.dp, x.tp, x.sp, x.pp, x.vpp, x.micro_batch, x.microbatches, x.zero,
                static_cast<int>(x.recompute), c.time.total_s, static_cast<long long>(c.peak_bytes));
  return buf;
}

TEST(PlannerTest, SkippingHopelessGroupsKeepsTheSameTop) {
  // Every schedule of the registry, evaluated fastest-possible first with the hopeless groups
  // pruned before their schedule is built, against every group built and evaluated: the same top
  // k, in roomy memory and in memory tight enough that most candidates are over it, with layers
  // that split evenly and (30) unevenly over the pipeline ranks.
  memory::ModelSpec uneven = Llama7b();
  uneven.layers = 30;
  for (const memory::ModelSpec& model : {Llama7b(), uneven})
  for (int gib : {80, 24}) {
    SearchSpace s;
    s.global_batch = 32;
    s.micro_batches = {1, 2};
    s.vpps = {2, 3};
    PlanOptions bounded, full;
    bounded.top_k = full.top_k = 5;
    full.bound_by_step_time = false;
    auto a = Plan(model, Cluster(16, gib), s, bounded);
    auto b = Plan(model, Cluster(16, gib), s, full);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
    ASSERT_EQ(a->top.size(), 5u) << gib;
    ASSERT_EQ(a->top.size(), b->top.size());
    for (size_t i = 0; i < a->top.size(); ++i) {
      EXPECT_EQ(Key(a->top[i]), Key(b->top[i])) << model.layers << " layers, " << gib << " GiB, #" << i;
    }
    int64_t pruned = 0, skipped = 0;
    for (const PrunedReason& p : a->pruned) {
      pruned += p.count;
      if (p.reason.find("cannot enter the top k") == 0) skipped += p.count;
    }
    EXPECT_EQ(pruned + a->feasible, a->candidates);
    EXPECT_GT(skipped, 0);
    EXPECT_LT(a->schedule_profiles, b->schedule_profiles);
  }
}

TEST(PlannerTest, TheMemoryBoundsNeverPruneACandidateThatFits) {
  // Every candidate with memory no object, against the search in memory that only some fit:
  // exactly those whose peak fits are found (the bound before a schedule is built, ceil(L/p)
  // blocks and one micro-batch, prunes none of them), with even and uneven layers.
  memory::ModelSpec uneven = Llama7b();
  uneven.layers = 30;
  for (const memory::ModelSpec& model : {Llama7b(), uneven}) {
    SearchSpace s;
    s.global_batch = 32;
    s.micro_batches = {1, 2};
    s.vpps = {2, 3};
    PlanOptions all;
    all.top_k = 1 << 20;
    all.bound_by_step_time = false;
    auto roomy = Plan(model, Cluster(16, 1 << 20), s, all);
    ASSERT_TRUE(roomy.ok()) << roomy.status().ToString();
    std::vector<int64_t> peaks;
    for (const Candidate& c : roomy->top) peaks.push_back(c.peak_bytes);
    std::sort(peaks.begin(), peaks.end());
    for (size_t q : {peaks.size() / 10, peaks.size() / 2}) {
      ClusterSpec tight = Cluster(16, 1);
      tight.gpu_memory_bytes = peaks[q];
      auto some = Plan(model, tight, s, all);
      ASSERT_TRUE(some.ok()) << some.status().ToString();
      std::vector<std::string> want, got;
      for (const Candidate& c : roomy->top) {
        if (c.peak_bytes <= peaks[q]) want.push_back(Key(c));
      }
      for (const Candidate& c : some->top) got.push_back(Key(c));
      ASSERT_GT(want.size(), q);
      EXPECT_EQ(got, want) << model.layers << " layers, " << peaks[q] << " B";
    }
  }
}

TEST(PlannerTest, TheCallersBoundKeepsEveryCandidateUnderIt) {
  // time_to_beat T (schedule "auto": the best found on other world sizes): every candidate at or
  // under T is still found, in the same order; fewer schedules are built.
  SearchSpace s;
  s.global_batch = 32;
  s.micro_batches = {1, 2};
  PlanOptions full;
  full.top_k = 40;
  full.bound_by_step_time = false;
  auto b = Plan(Llama7b(), Cluster(16, 80), s, full);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(b->top.size(), 40u);
  PlanOptions bounded = full;
  bounded.bound_by_step_time = true;
  bounded.time_to_beat = b->top[9].time.total_s;
  auto a = Plan(Llama7b(), Cluster(16, 80), s, bounded);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  std::vector<std::string> want, got;
  for (const Candidate& c : b->top) {
    if (c.time.total_s <= bounded.time_to_beat) want.push_back(Key(c));
  }
  for (const Candidate& c : a->top) {
    if (c.time.total_s <= bounded.time_to_beat) got.push_back(Key(c));
  }
  ASSERT_GE(want.size(), 10u);
  EXPECT_EQ(got, want);
  EXPECT_LT(a->schedule_profiles, b->schedule_profiles);
  bool named = false;
  for (const PrunedReason& p : a->pruned) named = named || p.example.find("the caller's bound is") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(PlannerTest, RefusedSchedulesAreNamed) {
  SearchSpace s = Small();
  s.schedules = {"interleaved"};
  s.vpps = {2};
  auto res = Plan(Llama7b(), Cluster(16, 80), s);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  int64_t pruned = 0;
  for (const PrunedReason& p : res->pruned) pruned += p.count;
  EXPECT_EQ(pruned + res->feasible, res->candidates);
}

TEST(PlannerTest, FixedDegreesLimitTheSpace) {
  // 16 GPUs, tp 1 only: pp in {1, 2, 4, 8, 16}; fixing pp 4 leaves dp 4, and fixing 8
  // micro-batches of the global batch 64 leaves micro-batch 2 (4 x 2 x 8 = 64).
  SearchSpace s = Small();
  s.max_tp = 1;
  s.zero_stages = {0};
  s.recompute = {memory::Recompute::kNone};
  s.pp = 4;
  PlanOptions o;
  o.top_k = 100;
  auto res = Plan(Llama7b(), Cluster(16, 80), s, o);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->candidates, 2 * 5);  // 2 schedules x 5 micro-batch sizes
  for (const Candidate& c : res->top) EXPECT_EQ(c.shape.pp, 4);
  s.dp = 2;  // pp 4 x dp 2 does not fill 16 GPUs: nothing is in the space
  res = Plan(Llama7b(), Cluster(16, 80), s, o);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->candidates, 0);
  s.dp = 4;
  s.microbatches = 8;
  res = Plan(Llama7b(), Cluster(16, 80), s, o);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->candidates, 2 * 5);
  ASSERT_FALSE(res->top.empty());  // 1f1b fits; fthenb's 8 micro-batches in flight may not
  EXPECT_EQ(static_cast<int64_t>(res->top.size()), res->feasible);
  for (const Candidate& c : res->top) {
    EXPECT_EQ(c.shape.dp, 4);
    EXPECT_EQ(c.shape.micro_batch, 2);
    EXPECT_EQ(c.shape.microbatches, 8);
  }
  int64_t pruned = 0;
  for (const PrunedReason& p : res->pruned) pruned += p.count;
  EXPECT_EQ(pruned + res->feasible, res->candidates);
  s.microbatches = -1;
  EXPECT_EQ(Plan(Llama7b(), Cluster(16, 80), s).status().message(), "microbatches: must be >= 0 (0: any), got -1");
}

TEST(PlannerTest, NothingFitsIsNotAnError) {
  auto res = Plan(*memory::FindModelPreset("llama2-70b"), Cluster(8, 8), Small());
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE(res->top.empty());
  EXPECT_EQ(res->feasible, 0);
  EXPECT_FALSE(res->pruned.empty());
}

TEST(PlannerTest, ErrorsNameTheField) {
  SearchSpace s = Small();
  s.global_batch = 0;
  EXPECT_EQ(Plan(Llama7b(), Cluster(8, 80), s).status().message(), "global-batch: must be >= 1, got 0");
  s = Small();
  s.schedules = {"nope"};
  EXPECT_NE(Plan(Llama7b(), Cluster(8, 80), s).status().message().find("schedule: unknown name \"nope\""),
            std::string::npos);
  EXPECT_EQ(Plan(Llama7b(), Cluster(0, 80), Small()).status().message(), "gpus: must be in [1, 1048576], got 0");
}

// MinBubbleRate is a floor for every schedule the registry builds, checked against the simulator
// on every family and shapes around the limits (few micro-batches, many, one rank).
TEST(ScheduleCacheTest, NoScheduleBeatsTheLeastBubble) {
  int checked = 0;
  for (const schedules::ScheduleInfo& info : schedules::AllSchedules()) {
    const std::string name = info.name;
    if (name == "csv") continue;
    for (int pp : {1, 2, 3, 4, 8, 16}) {
      for (int vpp : {1, 2, 3}) {
        for (int m : {1, 2, 3, 4, 8, 16, 24}) {
          const ScheduleProfile p = ProfileSchedule(name, pp, vpp, m);
          if (!p.status.ok()) continue;  // a shape the family refuses
          ++checked;
          EXPECT_GE(p.bubble_rate, MinBubbleRate(pp, vpp, m) - 1e-12)
              << name << " pp " << pp << " vpp " << vpp << " m " << m;
        }
      }
    }
  }
  EXPECT_GT(checked, 300);
  // Tight where a schedule reaches it: one rank has no bubble; 1F1B's is 3 times the floor's wait.
  EXPECT_EQ(MinBubbleRate(1, 1, 8), 0.0);
  EXPECT_DOUBLE_EQ(MinBubbleRate(4, 1, 8), 3.0 / 27.0);
  // Few micro-batches: stage 0's first B at 2 pp - 1 and then its 2 m of B and W, which a schedule
  // with a separate W reaches (4 ranks, 1 micro-batch: 8 + 1 = 9 for work 3; 8 ranks, 4: 16 + 7 = 23
  // for 12); at two chunks a rank, 16 + 3 / 2 for work 6.
  EXPECT_DOUBLE_EQ(MinBubbleRate(4, 1, 1), 1 - 3.0 / 9.0);
  EXPECT_DOUBLE_EQ(MinBubbleRate(8, 1, 4), 1 - 12.0 / 23.0);
  EXPECT_DOUBLE_EQ(MinBubbleRate(8, 2, 2), 1 - 6.0 / 17.5);
  for (auto [pp, m] : {std::pair{4, 1}, std::pair{8, 4}}) {
    double least = 1;
    for (const schedules::ScheduleInfo& info : schedules::AllSchedules()) {
      if (std::string(info.name) == "csv") continue;
      const ScheduleProfile p = ProfileSchedule(info.name, pp, 1, m);
      if (p.status.ok()) least = std::min(least, p.bubble_rate);
    }
    EXPECT_DOUBLE_EQ(least, MinBubbleRate(pp, 1, m)) << "pp " << pp << " m " << m;
  }
}

// Extrapolated profiles (many micro-batches) against the full build, for every family: the
// same rank profiles and bubble rate, or built in full where the steady state did not show.
TEST(ScheduleCacheTest, ExtrapolatedProfilesEqualTheFullBuild) {
  int extrapolated = 0, compared = 0;
  for (const schedules::ScheduleInfo& info : schedules::AllSchedules()) {
    const std::string name = info.name;
    if (name == "csv") continue;
    for (int pp : {2, 3, 4}) {
      for (int vpp : {1, 2}) {
        for (int extra : {0, 1, 5}) {
          const int m = 8 * pp * vpp + 2 * pp * extra;
          const ScheduleProfile full = ProfileScheduleAt(name, pp, vpp, m);
          const ScheduleProfile quick = ProfileSchedule(name, pp, vpp, m);
          const std::string where = name + " pp " + std::to_string(pp) + " vpp " + std::to_string(vpp) + " m " + std::to_string(m);
          ASSERT_EQ(quick.status.ok(), full.status.ok()) << where << ": " << quick.status.ToString() << " / " << full.status.ToString();
          if (!full.status.ok()) continue;
          ++compared;
          extrapolated += quick.built_at < m;
          EXPECT_EQ(quick.microbatches, m) << where;
          EXPECT_NEAR(quick.bubble_rate, full.bubble_rate, 1e-12) << where << " (built at " << quick.built_at << ")";
          EXPECT_EQ(quick.stage_to_rank, full.stage_to_rank) << where;
          ASSERT_EQ(quick.rank_profile.size(), full.rank_profile.size()) << where;
          for (size_t r = 0; r < full.rank_profile.size(); ++r) {
            ASSERT_EQ(quick.rank_profile[r].size(), full.rank_profile[r].size()) << where << " rank " << r;
            for (size_t i = 0; i < full.rank_profile[r].size(); ++i) {
              EXPECT_EQ(quick.rank_profile[r][i].stored, full.rank_profile[r][i].stored) << where << " rank " << r;
              EXPECT_EQ(quick.rank_profile[r][i].pending_w, full.rank_profile[r][i].pending_w) << where << " rank " << r;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 100);
  EXPECT_GT(extrapolated, compared / 2);
  std::printf("extrapolated %d of %d profiles\n", extrapolated, compared);
}

TEST(ScheduleCacheTest, OneFOneBProfileAndBubble) {
  ScheduleProfile p = ProfileSchedule("1f1b", 4, 1, 8);
  ASSERT_TRUE(p.status.ok());
  EXPECT_DOUBLE_EQ(p.bubble_rate, 3.0 / 11.0);  // (p - 1) / (m + p - 1) with B = W = F
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(p.rank_profile[r].size(), 1u);
    EXPECT_EQ(p.rank_profile[r][0].stored, 4 - r);
    EXPECT_EQ(p.rank_profile[r][0].pending_w, 0);
  }
  ScheduleCache cache;
  cache.Get("1f1b", 4, 1, 8);
  cache.Get("1f1b", 4, 1, 8);
  EXPECT_EQ(cache.misses(), 1);
  EXPECT_EQ(cache.hits(), 1);
}

// Shared by threads (a coordinator's searches): every Get of one shape returns the profile built
// alone, one copy is kept, and Prefetch beside the Gets adds the rest once.
TEST(ScheduleCacheTest, ThreadsShareOneCache) {
  ScheduleCache cache;
  const ScheduleProfile want = ProfileSchedule("zbh1", 4, 1, 12);
  std::vector<std::thread> threads;
  std::atomic<int> same{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      if (t == 3) {
        cache.Prefetch({{"1f1b", 4, 1, 8}, {"zbh1", 4, 1, 12}, {"interleaved", 4, 2, 8}}, 2);
        return;
      }
      const ScheduleProfile& got = cache.Get("zbh1", 4, 1, 12);
      if (got.rank_profile == want.rank_profile && got.bubble_rate == want.bubble_rate) ++same;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(same.load(), 3);
  EXPECT_EQ(cache.size(), 3u);
  const int64_t built = cache.misses();
  cache.Get("interleaved", 4, 2, 8);  // Prefetch's: found, not built again
  EXPECT_EQ(cache.misses(), built);
}

}  // namespace
}  // namespace pipecoord::planner
