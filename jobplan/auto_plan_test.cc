// Schedule "auto" on a tiny model: the chosen strategy, its budgets against PlanJob's, what the
// spec fixed kept, and the errors (no worker, nothing fits: the smallest shortfall).
#include "jobplan/auto_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "jobplan/tiny_spec_for_tests.h"
#include "memory/units.h"

namespace pipecoord::jobplan {
namespace {

// TinySpec (4 layers of hidden 32) with every strategy field left to the coordinator.
v1::JobSpec AutoSpec(int global_batch) {
  v1::JobSpec s = TinySpec(0, "auto");
  s.set_microbatches(0);
  s.set_micro_batch_size(0);
  s.set_global_batch(global_batch);
  return s;
}

// The spec a StrategyChoice stands for, planned from scratch: its budgets must be the report's.
v1::Plan Replan(const v1::JobSpec& auto_spec, const v1::StrategyChoice& c) {
  v1::JobSpec s = auto_spec;
  s.set_schedule(c.schedule());
  s.set_pp(c.pp());
  s.set_vpp(c.vpp());
  s.set_dp(c.dp());
  s.set_tp(c.tp());
  s.set_zero(c.zero());
  s.set_sequence_parallel(c.sequence_parallel());
  if (!c.recompute().empty()) s.set_recompute(c.recompute());
  s.set_microbatches(c.microbatches());
  s.set_micro_batch_size(c.micro_batch_size());
  EXPECT_TRUE(ValidateJobSpec(s).ok()) << ValidateJobSpec(s).ToString();
  auto plan = PlanJob(WithDefaults(s));
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? *plan : v1::Plan();
}

void ExpectPeakIsTheTightestBudget(const v1::StrategyChoice& c, const v1::Plan& plan) {
  ASSERT_EQ(plan.memory_budget_bytes_size(), c.pp());
  const auto& b = plan.memory_budget_bytes();
  const auto max = std::max_element(b.begin(), b.end());
  EXPECT_EQ(c.peak_bytes(), *max);
  EXPECT_EQ(c.tightest_rank(), max - b.begin());
  EXPECT_DOUBLE_EQ(c.predicted_bubble_rate(), plan.predicted_bubble_rate());
}

int64_t SumOfPruned(const v1::AutoPlanReport& r) {
  int64_t n = 0;
  for (const std::string& p : r.pruned()) n += std::stoll(p.substr(0, p.find(':')));
  return n;
}

// Up to 64 free workers every world size is tried; above, the free count and the sizes {1, 3, 5,
// 7} x 2^j below it: for 16,384, 15 powers of two (1 .. 16384), 13 of 3 x 2^j (3 .. 12288), 12
// of 5 x 2^j (5 .. 10240) and 12 of 7 x 2^j (7 .. 14336).
TEST(AutoPlanTest, WorldSizesTried) {
  std::vector<int> few = WorldSizes(6);
  EXPECT_EQ(few, (std::vector<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(WorldSizes(64).size(), 64u);
  const std::vector<int> fleet = WorldSizes(16384);
  EXPECT_EQ(fleet.size(), 15u + 13u + 12u + 12u);
  EXPECT_TRUE(std::is_sorted(fleet.begin(), fleet.end()));
  for (int w : {1, 7, 96, 12288, 10240, 14336, 16384}) {
    EXPECT_TRUE(std::binary_search(fleet.begin(), fleet.end(), w)) << w;
  }
  for (int w : {9, 16383, 15000}) EXPECT_FALSE(std::binary_search(fleet.begin(), fleet.end(), w)) << w;
  const std::vector<int> odd = WorldSizes(1000);  // the free count itself, though not of the form
  EXPECT_EQ(odd.back(), 1000);
  EXPECT_TRUE(std::binary_search(odd.begin(), odd.end(), 896));  // 7 x 128
}

TEST(AutoPlanTest, TinyModelOnFourWorkers) {
  const v1::JobSpec spec = AutoSpec(8);
  ASSERT_TRUE(ValidateJobSpec(spec).ok());
  auto r = PlanAuto(spec, {4, 0, "cpu"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const v1::StrategyChoice& c = r->report.chosen();
  // The deepest pipeline the 4 layers allow, one sample per micro-batch (the most micro-batches,
  // the smallest bubble), with ZB-H1 (the simplest of the zero-bubble schedules that tie).
  EXPECT_EQ(DescribeStrategy(c), "zbh1, pp 4, vpp 1, dp 1, 8 micro-batches of 1");
  EXPECT_EQ(std::vector<int>(c.stage_layers().begin(), c.stage_layers().end()), std::vector<int>({1, 1, 1, 1}));
  EXPECT_GT(c.predicted_step_s(), 0);
  // The resolved spec runs as is, and its plan is what PlanJob makes of it.
  EXPECT_EQ(r->spec.schedule(), "zbh1");
  EXPECT_EQ(r->spec.dp() * r->spec.microbatches() * r->spec.micro_batch_size(), 8);
  EXPECT_EQ(r->spec.global_batch(), 8);
  EXPECT_TRUE(ValidateJobSpec(r->spec).ok());
  EXPECT_EQ(r->plan.SerializeAsString(), PlanJob(r->spec)->SerializeAsString());
  ExpectPeakIsTheTightestBudget(c, r->plan);
  // The next best, slowest last, each with its own job's budgets.
  ASSERT_EQ(r->report.next_best_size(), 4);
  double previous = c.predicted_step_s();
  for (const v1::StrategyChoice& n : r->report.next_best()) {
    EXPECT_GE(n.predicted_step_s(), previous) << DescribeStrategy(n);
    previous = n.predicted_step_s();
    ExpectPeakIsTheTightestBudget(n, Replan(spec, n));
  }
  EXPECT_EQ(r->report.workers(), 4);
  EXPECT_EQ(r->report.worker_memory_bytes(), 0u);
  EXPECT_EQ(r->report.device_kind(), "cpu");
  EXPECT_EQ(r->report.pruned_for_memory(), 0);
  EXPECT_GT(r->report.feasible(), 0);
  EXPECT_EQ(SumOfPruned(r->report) + r->report.feasible(), r->report.candidates());
}

TEST(AutoPlanTest, MemoryDecides) {
  const v1::JobSpec spec = AutoSpec(8);
  auto free_for_all = PlanAuto(spec, {4, 0, "cpu"});
  ASSERT_TRUE(free_for_all.ok());
  const uint64_t best_peak = free_for_all->report.chosen().peak_bytes();
  // One byte short of the fastest plan's tightest rank: another strategy, one that fits, runs.
  auto r = PlanAuto(spec, {4, best_peak - 1, "cpu"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_LE(r->report.chosen().peak_bytes(), best_peak - 1);
  for (uint64_t b : r->plan.memory_budget_bytes()) EXPECT_LE(b, best_peak - 1);
  EXPECT_GT(r->report.pruned_for_memory(), 0);
  EXPECT_EQ(r->report.worker_memory_bytes(), best_peak - 1);
  EXPECT_EQ(SumOfPruned(r->report) + r->report.feasible(), r->report.candidates());
  EXPECT_GE(r->report.chosen().predicted_step_s(), free_for_all->report.chosen().predicted_step_s());
}

// On cuda workers the budgets are the CUDA backend's (pipecoord-cuda, in the spec's precision):
// the report's peak is the replanned job's tightest budget, not the CPU recipe's. (On this tiny
// model bf16 does not need less than fp32: its 18 B per parameter outweigh the halved
// activations.)
TEST(AutoPlanTest, CudaJobsAreSizedWithTheCudaRecipe) {
  for (const char* precision : {"fp32", "bf16"}) {
    v1::JobSpec spec = AutoSpec(8);
    spec.set_device("cuda");
    spec.set_precision(precision);
    auto r = PlanAuto(spec, {4, 0, "cuda"});
    ASSERT_TRUE(r.ok()) << precision << ": " << r.status().ToString();
    const v1::Plan plan = Replan(spec, r->report.chosen());
    ExpectPeakIsTheTightestBudget(r->report.chosen(), plan);
    v1::JobSpec cpu = spec;
    cpu.set_device("cpu");
    cpu.set_precision("fp32");
    const v1::Plan cpu_plan = Replan(cpu, r->report.chosen());
    EXPECT_NE(plan.memory_budget_bytes(0), cpu_plan.memory_budget_bytes(0)) << precision << ": the CPU recipe's budget";
    // Workers with exactly the winner's peak still get the winner: the planner's estimate is the
    // CUDA backend's too, so it does not prune what fits.
    auto tight = PlanAuto(spec, {4, r->report.chosen().peak_bytes(), "cuda"});
    ASSERT_TRUE(tight.ok()) << precision << ": " << tight.status().ToString();
    EXPECT_EQ(tight->report.chosen().DebugString(), r->report.chosen().DebugString()) << precision;
  }
}

// The CUDA backend runs ZeRO-1: with four replicas fixed and workers one byte short of the job
// without it, auto shards the optimizer's moments, and its report's peak is the budget the CUDA
// recipe gives the sharded job.
TEST(AutoPlanTest, CudaJobsShardTheOptimizerWhenMemoryForcesIt) {
  v1::JobSpec spec = AutoSpec(8);
  spec.set_device("cuda");
  spec.set_pp(1);
  spec.set_dp(4);
  spec.set_micro_batch_size(1);
  spec.set_zero(0);
  auto whole = PlanAuto(spec, {4, 0, "cuda"});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const uint64_t without = whole->report.chosen().peak_bytes();
  spec.clear_zero();
  auto r = PlanAuto(spec, {4, without - 1, "cuda"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->spec.zero(), 1);
  EXPECT_LE(r->report.chosen().peak_bytes(), without - 1);
  ExpectPeakIsTheTightestBudget(r->report.chosen(), Replan(spec, r->report.chosen()));
}

// The CUDA backend runs tensor (and sequence) parallelism: with one pipeline stage and one
// replica fixed and workers one byte short of the job at tp 1, auto splits the model over a
// tensor-parallel group, and its report's peak is the budget the CUDA recipe gives that job.
TEST(AutoPlanTest, CudaJobsSplitTheModelWhenMemoryForcesIt) {
  v1::JobSpec spec = AutoSpec(8);
  spec.set_device("cuda");
  spec.set_pp(1);
  spec.set_dp(1);
  spec.set_tp(1);
  auto whole = PlanAuto(spec, {2, 0, "cuda"});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const uint64_t without = whole->report.chosen().peak_bytes();
  spec.clear_tp();
  auto r = PlanAuto(spec, {2, without - 1, "cuda"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->spec.tp(), 2);
  EXPECT_LE(r->report.chosen().peak_bytes(), without - 1);
  ExpectPeakIsTheTightestBudget(r->report.chosen(), Replan(spec, r->report.chosen()));
}

// A cache of schedule shapes kept across searches (the coordinator's, across submissions): the
// second search of the same job builds no shape (its misses stay) and chooses, and shows next,
// exactly what a search with its own cache does; a different free count reuses what it can.
TEST(AutoPlanTest, ShapesKeptAcrossSearchesChooseAsAFreshSearch) {
  planner::ScheduleCache shapes;
  AutoPlanOptions kept;
  kept.shapes = &shapes;
  const v1::JobSpec spec = AutoSpec(32);
  auto fresh = PlanAuto(spec, {16, 0, "cpu"});
  auto first = PlanAuto(spec, {16, 0, "cpu"}, kept);
  ASSERT_TRUE(fresh.ok() && first.ok()) << fresh.status().ToString() << first.status().ToString();
  const int64_t built = shapes.misses();
  EXPECT_GT(built, 0);
  auto second = PlanAuto(spec, {16, 0, "cpu"}, kept);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(shapes.misses(), built) << "the second search built shapes again";
  EXPECT_GT(shapes.hits(), 0);
  for (const auto* r : {&*first, &*second}) {
    EXPECT_EQ(r->report.chosen().DebugString(), fresh->report.chosen().DebugString());
    ASSERT_EQ(r->report.next_best_size(), fresh->report.next_best_size());
    for (int i = 0; i < fresh->report.next_best_size(); ++i) {
      EXPECT_EQ(r->report.next_best(i).DebugString(), fresh->report.next_best(i).DebugString()) << i;
    }
  }
  auto fewer = PlanAuto(spec, {12, 0, "cpu"}, kept);
  auto fewer_fresh = PlanAuto(spec, {12, 0, "cpu"});
  ASSERT_TRUE(fewer.ok() && fewer_fresh.ok());
  EXPECT_EQ(fewer->report.chosen().DebugString(), fewer_fresh->report.chosen().DebugString());
}

TEST(AutoPlanTest, TheBoundAcrossWorldSizesChoosesAsTheWholeSearch) {
  // World sizes searched largest first with the slower groups of smaller sizes pruned unbuilt
  // choose, and show next, exactly what every size searched in full does; on CPU workers (every
  // size up to 16) and on CUDA workers past kEveryWorldSizeUpTo with memory that forces ZeRO, tp
  // or recompute.
  struct Case {
    v1::JobSpec spec;
    FreeWorkers free;
  };
  v1::JobSpec cuda = AutoSpec(96);
  cuda.set_device("cuda");
  auto roomy = PlanAuto(cuda, {96, 0, "cuda", 8});
  ASSERT_TRUE(roomy.ok()) << roomy.status().ToString();
  const uint64_t tight = roomy->report.chosen().peak_bytes() * 3 / 4;
  // CPU workers 4 KiB short of the roomy choice: the planner's estimates rank strategies first whose
  // job budgets (transients it does not count) are over, so the choice looks past the fastest 8.
  auto cpu = PlanAuto(AutoSpec(32), {16, 0, "cpu"});
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  const uint64_t cpu_short = cpu->report.chosen().peak_bytes() - 4096;
  for (const Case& c : {Case{AutoSpec(32), {16, 0, "cpu"}}, Case{AutoSpec(32), {16, cpu_short, "cpu"}},
                        Case{cuda, {96, tight, "cuda", 8}}}) {
    auto bounded = PlanAuto(c.spec, c.free);
    AutoPlanOptions o;
    o.bound_across_world_sizes = false;
    auto full = PlanAuto(c.spec, c.free, o);
    ASSERT_TRUE(bounded.ok() && full.ok()) << bounded.status().ToString() << full.status().ToString();
    EXPECT_EQ(bounded->report.chosen().DebugString(), full->report.chosen().DebugString());
    ASSERT_EQ(bounded->report.next_best_size(), full->report.next_best_size());
    for (int i = 0; i < full->report.next_best_size(); ++i) {
      EXPECT_EQ(bounded->report.next_best(i).DebugString(), full->report.next_best(i).DebugString()) << i;
    }
    EXPECT_EQ(bounded->report.candidates(), full->report.candidates());
    EXPECT_EQ(SumOfPruned(bounded->report) + bounded->report.feasible(), bounded->report.candidates());
    EXPECT_LT(bounded->report.feasible(), full->report.feasible());  // evaluated less
    if (c.free.memory_bytes == cpu_short) {
      int64_t over = 0;
      for (const std::string& p : bounded->report.pruned()) {
        if (p.find("job budget over the workers' memory") != std::string::npos) over = std::stoll(p);
      }
      EXPECT_GE(over, 4);  // 5 fits among the first 8 were impossible
    }
  }
}

TEST(AutoPlanTest, NothingFitsNamesTheSmallestShortfall) {
  v1::JobSpec spec = AutoSpec(8);
  spec.set_recompute("none");  // fixed: left open, recompute makes it fit (below)
  auto r = PlanAuto(spec, {4, 300 << 10, "cpu"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  // The leanest: no pipeline, 4 tensor-parallel shards with sequence parallelism, one sample per
  // micro-batch (tp splits the matrices and the vocabulary tables, sp the rest); it needs this
  // much, as its own job plan says.
  v1::StrategyChoice leanest;
  leanest.set_schedule("1f1b");
  leanest.set_pp(1);
  leanest.set_vpp(1);
  leanest.set_dp(1);
  leanest.set_tp(4);
  leanest.set_sequence_parallel(true);
  leanest.set_recompute("none");
  leanest.set_microbatches(8);
  leanest.set_micro_batch_size(1);
  const v1::Plan plan = Replan(spec, leanest);
  ASSERT_EQ(plan.memory_budget_bytes_size(), 1);
  const auto& b = plan.memory_budget_bytes();
  EXPECT_EQ(memory::FormatBytes(b[0]), "304.4 KiB");
  EXPECT_EQ(r.status().message(),
            "spec.schedule: \"auto\" found no strategy that fits in memory: rank 0 needs 304.4 KiB, workers report "
            "300.0 KiB (the leanest of 1200 strategies for 4 cpu worker(s): 1f1b, pp 1, vpp 1, dp 1, tp 4+sp, 8 "
            "micro-batches of 1)");
  // Left open, auto recomputes: the same 300 KiB then hold a strategy, and its budgets fit.
  spec.clear_recompute();
  auto fits = PlanAuto(spec, {4, 300 << 10, "cpu"});
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_NE(fits->spec.recompute(), "none");
  EXPECT_LE(fits->report.chosen().peak_bytes(), 300u << 10);
  std::printf("300 KiB workers: %s, peak %s\n", DescribeStrategy(fits->report.chosen()).c_str(),
              memory::FormatBytes(static_cast<int64_t>(fits->report.chosen().peak_bytes())).c_str());
}

TEST(AutoPlanTest, WhatTheSpecFixesStaysFixed) {
  v1::JobSpec spec = AutoSpec(16);
  spec.set_dp(2);
  spec.set_micro_batch_size(2);
  auto r = PlanAuto(spec, {4, 0, "cpu"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->spec.dp(), 2);
  EXPECT_EQ(r->spec.micro_batch_size(), 2);
  EXPECT_EQ(r->spec.microbatches(), 4);  // 16 = 2 x 4 x 2
  EXPECT_LE(r->spec.pp() * r->spec.dp(), 4);
  for (const v1::StrategyChoice& n : r->report.next_best()) {
    EXPECT_EQ(n.dp(), 2);
    EXPECT_EQ(n.micro_batch_size(), 2);
  }
  // stageLayers fixes pp (and the placement); vpp 2 leaves the V and looped two-chunk schedules.
  spec = AutoSpec(8);
  spec.add_stage_layers(4);
  spec.add_stage_layers(2);
  spec.set_vpp(2);
  spec.mutable_model()->set_layers(6);
  ASSERT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec).ToString();
  r = PlanAuto(spec, {4, 0, "cpu"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->spec.pp(), 2);
  EXPECT_EQ(r->spec.vpp(), 2);
  EXPECT_EQ(std::vector<int>(r->spec.stage_layers().begin(), r->spec.stage_layers().end()), std::vector<int>({4, 2}));
  EXPECT_EQ(std::vector<int>(r->report.chosen().stage_layers().begin(), r->report.chosen().stage_layers().end()),
            std::vector<int>({4, 2}));
}

TEST(AutoPlanTest, NoWorkerOrTooFew) {
  EXPECT_EQ(PlanAuto(AutoSpec(8), {0, 0, "cpu"}).status().message(),
            "spec.schedule: \"auto\" plans for the free workers, and no cpu worker is free now (pipectl workers)");
  EXPECT_EQ(PlanAuto(AutoSpec(8), {0, 0, "cpu"}).status().code(), Code::kFailedPrecondition);
  v1::JobSpec spec = AutoSpec(8);
  spec.set_pp(2);
  spec.set_dp(2);
  EXPECT_EQ(PlanAuto(spec, {3, 0, "cpu"}).status().message(),
            "spec.pp x spec.dp x spec.tp: the spec fixes 2 x 2 x 1 = 4 worker(s), and 3 cpu worker(s) are free");
  // A global batch of 1 on one layer: no pipeline, on 1 worker or on 2 as tp 2 (tp 3 does not
  // divide the heads).
  spec = AutoSpec(1);
  spec.mutable_model()->set_layers(1);
  spec.set_recompute("none");
  auto r = PlanAuto(spec, {3, 0, "cpu"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::string> all = {DescribeStrategy(r->report.chosen())};
  for (const auto& n : r->report.next_best()) all.push_back(DescribeStrategy(n));
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<std::string>{"1f1b, pp 1, vpp 1, dp 1, 1 micro-batches of 1",
                                           "1f1b, pp 1, vpp 1, dp 1, tp 2+sp, 1 micro-batches of 1",
                                           "1f1b, pp 1, vpp 1, dp 1, tp 2, 1 micro-batches of 1"}));
  // tp stays 1 where the spec fixes it.
  spec.set_tp(1);
  r = PlanAuto(spec, {3, 0, "cpu"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->report.next_best_size(), 0);
}

}  // namespace
}  // namespace pipecoord::jobplan
