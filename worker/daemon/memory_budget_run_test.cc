// The plan's memory budget against what the CPU backend really reports: every schedule family
// runs in-process (worker/daemon/local_run: one executor per rank, the CPU backend), and each
// rank's reported peak of every step must be within its budget, and the budget tight.
#include <gtest/gtest.h>

#include <cstdio>

#include "common/rank_layout.h"
#include "jobplan/layout.h"
#include "jobplan/memory_budget.h"
#include "jobplan/test_spec.h"
#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "worker/daemon/local_run.h"

namespace pipecoord::worker {
namespace {

struct Case {
  std::string schedule;
  int pp, vpp, dp, microbatches, layers;
  std::vector<int> stage_layers;
  int tp = 1;
  int zero = 0;
  std::string recompute = "";
  bool sp = false;
  int kv_heads = 0;  // grouped-query attention (0: heads)
  bool qkv_bias = false;  // Qwen2's q, k, v biases
  bool tied = false;      // tied input and output embeddings
  int head_dim = 0;       // features per head when not hidden / heads
};

// The demo's tiny model (examples/job.json: h 64, 4 heads, V 128, s 32, b 4), shorter.
v1::JobSpec Spec(const Case& c) {
  v1::JobSpec s;
  s.set_name(c.schedule);
  s.set_schedule(c.schedule);
  s.set_pp(c.pp);
  s.set_vpp(c.vpp);
  s.set_dp(c.dp);
  s.set_tp(c.tp);
  s.set_zero(c.zero);
  if (!c.recompute.empty()) s.set_recompute(c.recompute);
  s.set_sequence_parallel(c.sp);
  s.set_microbatches(c.microbatches);
  s.set_micro_batch_size(4);
  s.set_steps(2);
  s.set_learning_rate(0.003);
  for (int n : c.stage_layers) s.add_stage_layers(n);
  auto* m = s.mutable_model();
  m->set_layers(c.layers);
  m->set_hidden(64);
  m->set_heads(4);
  m->set_kv_heads(c.kv_heads);
  m->set_qkv_bias(c.qkv_bias);
  m->set_tied_embeddings(c.tied);
  m->set_head_dim(c.head_dim);
  m->set_vocab(128);
  m->set_seq_len(32);
  m->set_seed(7);
  return s;
}

// Runs `raw` and checks every rank's peak of every step against its budget: never over, and
// not under either (the budget counts what the backend allocates, so a healthy rank reports
// exactly its budget; a budget above the peak would hide that much over-allocation). Returns
// the peaks by global rank (the highest step's).
std::vector<uint64_t> RunAndCompare(const v1::JobSpec& raw) {
  std::vector<uint64_t> peaks;
  EXPECT_TRUE(jobplan::ValidateJobSpec(raw).ok()) << jobplan::ValidateJobSpec(raw).ToString();
  const v1::JobSpec spec = jobplan::WithDefaults(raw);
  auto plan = jobplan::PlanJob(spec);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (!plan.ok()) return peaks;
  auto run = worker::RunLocally(raw);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  if (!run.ok()) return peaks;
  const RankLayout layout = jobplan::LayoutOf(spec);
  for (int g = 0; g < static_cast<int>(run->reports.size()); ++g) {
    const int r = layout.PipelineRank(g);
    const uint64_t budget = plan->memory_budget_bytes(r);
    uint64_t peak = 0;
    EXPECT_EQ(run->reports[g].size(), static_cast<size_t>(spec.steps()));
    for (const worker::StepReport& report : run->reports[g]) {
      const uint64_t p = report.summary.memory_peak_bytes();
      peak = std::max(peak, p);
      // The CPU backend caches nothing: what it holds is what it uses.
      EXPECT_EQ(report.summary.memory_reserved_bytes(), report.summary.memory_in_use_bytes());
      EXPECT_GT(report.summary.memory_reserved_bytes(), 0u);
      EXPECT_LE(p, budget) << spec.schedule() << " " << layout.Name(g) << " step " << report.summary.step()
                           << ": over the plan's budget";
      EXPECT_EQ(budget - std::min(p, budget), 0u)
          << spec.schedule() << " " << layout.Name(g) << " step " << report.summary.step()
          << ": the budget is above what the backend allocated";
    }
    std::printf("%s pp %d vpp %d dp %d tp %d%s zero %d recompute %s m %d: %s: peak %llu B, budget %llu B\n",
                spec.schedule().c_str(),
                spec.pp(), spec.vpp(), spec.dp(), layout.tp(), spec.sequence_parallel() ? "+sp" : "", spec.zero(),
                spec.recompute().empty() ? "none" : spec.recompute().c_str(), spec.microbatches(), layout.Name(g).c_str(),
                static_cast<unsigned long long>(peak), static_cast<unsigned long long>(budget));
    peaks.push_back(peak);
  }
  return peaks;
}

class MemoryBudgetRunTest : public ::testing::TestWithParam<Case> {};

TEST_P(MemoryBudgetRunTest, EveryRanksPeakIsItsBudget) { RunAndCompare(Spec(GetParam())); }

// The example of docs/monitoring.md and memory_budget_test: the health tests' tiny model.
TEST(MemoryBudgetRun, TheDocumentedTinyModel) {
  v1::JobSpec spec = jobplan::TestSpec();
  spec.set_steps(2);
  EXPECT_EQ(RunAndCompare(spec), (std::vector<uint64_t>{777024, 688960}));
}

INSTANTIATE_TEST_SUITE_P(
    EverySchedule, MemoryBudgetRunTest,
    ::testing::Values(Case{"fthenb", 4, 0, 1, 8, 8, {}}, Case{"1f1b", 4, 0, 1, 8, 8, {}},
                      Case{"eager-1f1b", 4, 0, 1, 8, 8, {}}, Case{"interleaved", 2, 2, 1, 4, 8, {}},
                      Case{"looped-bfs", 2, 2, 1, 4, 8, {}}, Case{"zbh1", 4, 0, 1, 8, 8, {}},
                      Case{"zbh2", 4, 0, 1, 8, 8, {}}, Case{"zb-auto", 4, 0, 1, 8, 8, {}},
                      Case{"zbv", 2, 2, 1, 4, 8, {}}, Case{"v-half", 2, 2, 1, 4, 8, {}},
                      Case{"v-min", 2, 2, 1, 4, 8, {}}, Case{"dualpipev", 2, 2, 1, 4, 8, {}},
                      // Uneven layers and micro-batches, and data parallelism.
                      Case{"interleaved", 2, 2, 1, 5, 7, {}}, Case{"zbh2", 3, 0, 1, 5, 7, {1, 4, 2}},
                      Case{"1f1b", 2, 0, 2, 4, 8, {}},
                      // dp 2 with two stages per rank: a stage's REDUCE_GRAD runs beside the other's backwards.
                      Case{"zbv", 2, 2, 2, 4, 8, {}},
                      // Tensor parallelism: every rank holds its slices (memory/pipecoord_cpu_recipe.cc).
                      Case{"1f1b", 2, 0, 1, 4, 8, {}, 2}, Case{"zbh1", 2, 0, 2, 4, 8, {}, 2},
                      Case{"interleaved", 2, 2, 1, 5, 7, {}, 2}, Case{"zbv", 2, 2, 1, 4, 8, {}, 4},
                      Case{"dualpipev", 2, 2, 1, 4, 8, {}, 2},
                      Case{"v-auto", 2, 2, 1, 4, 8, {}},
                      // ZeRO-1: each replica holds the moments of ceil(n / dp) of a stage's n
                      // parameters; dp 3 cuts tensors unevenly (the padded shards stay exact).
                      Case{"1f1b", 2, 0, 2, 4, 8, {}, 1, 1}, Case{"zbh1", 2, 0, 3, 4, 7, {}, 1, 1},
                      Case{"zbv", 2, 2, 2, 4, 8, {}, 2, 1}, Case{"interleaved", 2, 2, 3, 5, 7, {}, 1, 1},
                      // Activation recompute: F keeps less until B (memory/pipecoord_cpu_recipe.cc).
                      Case{"1f1b", 4, 0, 1, 8, 8, {}, 1, 0, "selective"}, Case{"1f1b", 4, 0, 1, 8, 8, {}, 1, 0, "full"},
                      Case{"zbh1", 2, 0, 2, 4, 8, {}, 2, 1, "full"}, Case{"zbv", 2, 2, 1, 4, 8, {}, 1, 0, "selective"},
                      Case{"dualpipev", 2, 2, 1, 4, 8, {}, 2, 0, "full"},
                      Case{"interleaved", 2, 2, 1, 5, 7, {}, 1, 0, "full"},
                      // Sequence parallelism: what lies outside the tp regions on 1/tp of the tokens.
                      Case{"1f1b", 2, 0, 1, 4, 8, {}, 2, 0, "", true}, Case{"zbh1", 2, 0, 2, 4, 8, {}, 2, 1, "", true},
                      Case{"zbv", 2, 2, 1, 4, 8, {}, 4, 0, "selective", true},
                      Case{"interleaved", 2, 2, 1, 5, 7, {}, 2, 0, "full", true}, Case{"dualpipev", 2, 2, 1, 4, 8, {}, 2, 0, "", true},
                      // ZeRO-2: the gradients of the shard only, whole from a stage's first W to OPT.
                      Case{"1f1b", 2, 0, 2, 4, 8, {}, 1, 2}, Case{"zbh1", 2, 0, 3, 4, 7, {}, 1, 2},
                      Case{"zbv", 2, 2, 2, 4, 8, {}, 2, 2, "selective", true}, Case{"interleaved", 2, 2, 3, 5, 7, {}, 1, 2},
                      Case{"dualpipev", 2, 2, 2, 4, 8, {}, 1, 2},
                      // Grouped-query attention: k, v and their projections have kv_heads heads.
                      Case{"1f1b", 2, 0, 1, 4, 8, {}, 1, 0, "", false, 1}, Case{"zbh1", 2, 0, 2, 4, 8, {}, 2, 1, "", true, 2},
                      Case{"zbv", 2, 2, 1, 4, 8, {}, 2, 0, "selective", false, 2},
                      Case{"interleaved", 2, 2, 1, 5, 7, {}, 2, 2, "full", true, 2},
                      // Qwen2's q, k, v biases (parameters and their gradients; sliced with tp).
                      Case{"1f1b", 2, 0, 2, 4, 8, {}, 1, 1, "", false, 2, true},
                      Case{"zbv", 2, 2, 1, 4, 8, {}, 2, 2, "selective", true, 2, true},
                      // Tied embeddings: one matrix where one stage holds both ends, a copy on every
                      // other head stage (also on a V schedule's rank 0).
                      Case{"1f1b", 1, 0, 2, 4, 8, {}, 1, 1, "", false, 0, false, true},
                      Case{"1f1b", 2, 0, 2, 4, 8, {}, 2, 0, "", true, 0, false, true},
                      Case{"zbv", 2, 2, 1, 4, 8, {}, 1, 0, "selective", false, 2, false, true},
                      // An explicit head_dim: q, o and their gradients 4 x 32 wide, k, v 2 x 32 (h 64).
                      Case{"1f1b", 2, 0, 2, 4, 8, {}, 2, 1, "", true, 2, false, false, 32},
                      Case{"zbh1", 2, 0, 1, 4, 8, {}, 1, 0, "selective", false, 0, true, false, 8}),
    [](const ::testing::TestParamInfo<Case>& info) {
      const Case& c = info.param;
      std::string name = c.schedule + "_pp" + std::to_string(c.pp) + "_vpp" + std::to_string(c.vpp) + "_dp" +
                         std::to_string(c.dp) + "_m" + std::to_string(c.microbatches) + "_layers" +
                         std::to_string(c.layers) + (c.tp > 1 ? "_tp" + std::to_string(c.tp) : "") +
                         (c.zero > 0 ? "_zero" + std::to_string(c.zero) : "") +
                         (c.recompute.empty() ? "" : "_" + c.recompute) + (c.sp ? "_sp" : "") +
                         (c.kv_heads > 0 ? "_kv" + std::to_string(c.kv_heads) : "") + (c.qkv_bias ? "_qkvbias" : "") + (c.tied ? "_tied" : "") +
                         (c.head_dim > 0 ? "_headdim" + std::to_string(c.head_dim) : "");
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

}  // namespace
}  // namespace pipecoord::worker
