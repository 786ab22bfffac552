// The plan's memory budget for device "cuda" (jobplan/memory_budget.cc, from memory/'s
// pipecoord-cuda recipe) against the peak the CUDA backend reports: the caching pool's
// allocated bytes. Every schedule family runs in-process, one thread per rank, each rank's
// executor (worker/daemon/executor.h, the worker's own) over a CudaBackend on its own CudaDevice
// (its own pool, so each pool's peak is that rank's), in fp32 and in bf16. Each rank's peak of
// every step must equal its budget to the byte: above it is memory the plan does not know
// about, below it a budget that would hide that much over-allocation.
//
// Boundary tensors travel through PoolTransport (pool_transport_for_tests.h): Send copies the tensor to the host and
// lets go of it at once (the sender's pool frees it); Recv allocates the received tensor from
// the receiver's pool. This is the transport the budget is exact for; MemoryBudgetHeldSendsTest
// runs a few cases with PoolTransport holding each sent tensor a while, handed off as
// StagedTransport and NcclTransport hand theirs off (see memory_budget.h).
//
// Built twice: memory_budget_cuda_test_host on the host double of the GPU
// (host_kernels_for_tests.cc: host memory from a real CachingAllocator behind CudaDevice, so
// the counters are the pool's own, with its 512-byte rounding), which runs everywhere; and
// memory_budget_cuda_test on a GPU (gpu-tagged, skips without one). The model's tensors are
// all under 1 MiB, where the pool's block sizes are exactly the 512-rounded requests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "jobplan/assignment.h"
#include "jobplan/layout.h"
#include "jobplan/memory_budget.h"
#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "worker/cuda/cuda_backend.h"
#include "worker/cuda/cuda_test_util.h"
#include "worker/cuda/rank_threads_for_tests.h"
#include "worker/daemon/executor.h"
#include "worker/daemon/health_hooks.h"
#include "worker/transport/transport.h"

namespace pipecoord::worker::cuda {
namespace {

struct Case {
  std::string schedule;
  int pp, vpp, microbatches, layers;
  std::vector<int> stage_layers;
  std::string precision;
  int ffn = 0;  // 0: the default 192 (B's SwiGLU part peaks highest); 64: its attention part does
  int dp = 1, zero = 0;
  std::string recompute = "none";
  int probe_size = 0;  // spec.health.probeSize (0: the stage's largest GEMM)
  int tp = 1;
  bool sp = false;  // spec.sequenceParallel (tp > 1)
  int seq = 40;     // model.seqLen (short: the parameters' OPT outweighs the activations)
  int micro_batch_size = 2;
  int kv_heads = 0;  // model.kvHeads (grouped-query attention; 0: heads)
  int head_dim = 0;  // model.headDim (0: hidden / heads)
  bool qkv_bias = false;  // model.qkvBias (Qwen2)
  bool tied = false;      // model.tiedEmbeddings (Llama 3.2)
  int vocab = 96;         // model.vocab
  int window = 0;         // model.slidingWindow (Mistral)
};

// worker/cuda's test model (h 64, 4 heads of 16, V 96, s 40, b 2), deeper. With f = 3h a block's
// B peaks while dz, dgate and dup exist (3 [T, f]); with f = h, while dc, dx1, dout, dq, dk, dv
// and flash attention's delta do (6 [T, h] and [b, a, s] floats): both paths are checked.
v1::JobSpec Spec(const Case& c) {
  v1::JobSpec s;
  s.set_name(c.schedule);
  s.set_schedule(c.schedule);
  s.set_device("cuda");
  s.set_precision(c.precision);
  s.set_pp(c.pp);
  s.set_vpp(c.vpp);
  s.set_dp(c.dp);
  s.set_tp(c.tp);
  s.set_sequence_parallel(c.sp);
  s.set_zero(c.zero);
  s.set_recompute(c.recompute);
  s.mutable_health()->set_probe_size(c.probe_size);
  s.set_microbatches(c.microbatches);
  s.set_micro_batch_size(c.micro_batch_size);
  s.set_steps(2);
  s.set_learning_rate(1e-3);
  for (int n : c.stage_layers) s.add_stage_layers(n);
  v1::ModelSpec* m = s.mutable_model();
  m->set_layers(c.layers);
  m->set_hidden(64);
  m->set_ffn_hidden(c.ffn);
  m->set_heads(4);
  m->set_vocab(c.vocab);
  m->set_seq_len(c.seq);
  m->set_kv_heads(c.kv_heads);
  m->set_head_dim(c.head_dim);
  m->set_qkv_bias(c.qkv_bias);
  m->set_tied_embeddings(c.tied);
  m->set_sliding_window(c.window);
  m->set_seed(11);
  return s;
}

struct RankResult : RankOutcome {
  uint64_t weights_in_use = 0;  // the pool's allocated bytes once the backend was built
};

// Runs `spec` on one CudaBackend per rank (RunRankThreads), each with the worker's own hooks (no
// faults): every PROBE runs its numerical probe and its replay through the backend, whose tensors
// the pool counts, as on a worker. Results by global rank (RankLayout's: tp innermost, then pp,
// then dp).
std::vector<RankResult> RunRanks(const v1::JobSpec& spec, const v1::Plan& plan,
                                 SentTensors sent = SentTensors::kReleased) {
  std::vector<RankResult> results(static_cast<size_t>(jobplan::LayoutOf(spec).world()));
  RankSetup setup;
  setup.sent = sent;
  setup.hooks = [](const v1::Assignment& a) { return std::make_unique<HealthHooks>(a, std::vector<FaultRule>{}); };
  setup.built = [&](int g, ComputeBackend& backend) {
    results[static_cast<size_t>(g)].weights_in_use = backend.memory_in_use_bytes();
  };
  const std::vector<RankOutcome> ranks = RunRankThreads(spec, plan, setup);
  for (size_t g = 0; g < ranks.size(); ++g) static_cast<RankOutcome&>(results[g]) = ranks[g];
  return results;
}

using MemoryBudgetCudaTestBase = CudaModelTestBase;  // skips without a GPU (not on the host double)

class MemoryBudgetCudaTest : public MemoryBudgetCudaTestBase, public ::testing::WithParamInterface<Case> {};

// The largest |peak - budget| seen by any test of this binary, and how many (rank, step) peaks
// were compared, for the closing line.
int64_t worst_error = 0;
int64_t peaks_compared = 0;

TEST_P(MemoryBudgetCudaTest, EveryRanksPeakIsItsBudget) {
  const Case& c = GetParam();
  const v1::JobSpec raw = Spec(c);
  ASSERT_TRUE(jobplan::ValidateJobSpec(raw).ok()) << jobplan::ValidateJobSpec(raw).ToString();
  const v1::JobSpec spec = jobplan::WithDefaults(raw);
  auto plan = jobplan::PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const std::vector<jobplan::RankMemoryEstimate> estimates = jobplan::EstimateRankMemory(spec, *plan);

  const std::vector<RankResult> results = RunRanks(spec, *plan);
  for (int g = 0; g < static_cast<int>(results.size()); ++g) {
    // Every replica's (and tensor-parallel rank's) pipeline rank r has rank r's budget.
    const int r = jobplan::LayoutOf(spec).PipelineRank(g);
    SCOPED_TRACE("global rank " + std::to_string(g));
    const RankResult& rr = results[g];
    ASSERT_TRUE(rr.status.ok()) << rr.status.ToString();
    ASSERT_EQ(rr.reports.size(), static_cast<size_t>(spec.steps()));
    const uint64_t budget = plan->memory_budget_bytes(r);
    const jobplan::RankMemoryEstimate& e = estimates[r];
    ASSERT_EQ(budget, e.budget_bytes);
    // What the backend holds outside any step: every weight tensor's master, grad, m, v (and bf16
    // copy), the RoPE tables and the loss accumulator, as the budget counts them.
    EXPECT_EQ(rr.weights_in_use, e.parameter_bytes + e.constant_bytes);
    uint64_t peak = 0;
    for (const StepReport& report : rr.reports) {
      SCOPED_TRACE("step " + std::to_string(report.summary.step()));
      const uint64_t p = report.summary.memory_peak_bytes();
      peak = std::max(peak, p);
      worst_error = std::max<int64_t>(worst_error, p > budget ? p - budget : budget - p);
      ++peaks_compared;
      EXPECT_EQ(p, budget) << c.schedule << " " << c.precision << " rank " << r << ": peak " << p
                           << " B, budget " << budget << " B ("
                           << (p > budget ? "over: memory the plan does not know"
                                          : "under: the budget counts more than the pool allocated")
                           << ")";
      // Every micro-batch's tensors are back in the pool at the end of the step.
      EXPECT_EQ(report.summary.memory_in_use_bytes(), rr.weights_in_use);
      EXPECT_GE(report.summary.memory_reserved_bytes(), p);
    }
    std::printf("%s %s pp %d vpp %d dp %d zero %d recompute %s m %d layers %d ffn %d: global rank %d: peak %llu B, "
                "budget %llu B (params %llu, constants %llu, activations %llu)\n",
                c.schedule.c_str(), c.precision.c_str(), spec.pp(), spec.vpp(), spec.dp(), spec.zero(),
                spec.recompute().c_str(), spec.microbatches(), spec.model().layers(), spec.model().ffn_hidden(), g, static_cast<unsigned long long>(peak),
                static_cast<unsigned long long>(budget), static_cast<unsigned long long>(e.parameter_bytes),
                static_cast<unsigned long long>(e.constant_bytes),
                static_cast<unsigned long long>(e.activation_bytes));
  }
}

// A transport that keeps each sent tensor after Send (here until the rank's next Send, over the
// compute between, as StagedTransport keeps it until its copy ran and NcclTransport until the
// peer took it) and hands it off: every rank's peak is still its budget to the byte. Not handed off, the held tensors
// are counted and some rank's peak is over its budget: the false MEMORY events of the GPU
// end-to-end jobs (docs/gpu-results.md).
class MemoryBudgetHeldSendsTest : public MemoryBudgetCudaTestBase, public ::testing::WithParamInterface<Case> {};

TEST_P(MemoryBudgetHeldSendsTest, HandedOffTensorsLeaveThePeakAtTheBudget) {
  const v1::JobSpec spec = jobplan::WithDefaults(Spec(GetParam()));
  auto plan = jobplan::PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const std::vector<RankResult> held = RunRanks(spec, *plan, SentTensors::kHeldHandedOff);
  const std::vector<RankResult> counted = RunRanks(spec, *plan, SentTensors::kHeldNotHandedOff);
  uint64_t most_over = 0;
  for (int r = 0; r < spec.pp(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_TRUE(held[r].status.ok()) << held[r].status.ToString();
    ASSERT_TRUE(counted[r].status.ok()) << counted[r].status.ToString();
    ASSERT_EQ(held[r].reports.size(), static_cast<size_t>(spec.steps()));
    ASSERT_EQ(counted[r].reports.size(), static_cast<size_t>(spec.steps()));
    const uint64_t budget = plan->memory_budget_bytes(r);
    for (size_t i = 0; i < held[r].reports.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(i));
      const uint64_t p = held[r].reports[i].summary.memory_peak_bytes();
      EXPECT_EQ(p, budget) << "handed-off sends: peak " << p << " B, budget " << budget << " B";
      worst_error = std::max<int64_t>(worst_error, p > budget ? p - budget : budget - p);
      ++peaks_compared;
      const uint64_t q = counted[r].reports[i].summary.memory_peak_bytes();
      EXPECT_GE(q, budget);
      most_over = std::max(most_over, q - std::min(q, budget));
    }
    std::printf("%s %s held sends: rank %d: budget %llu B; peak handed off %llu B, not handed off %llu B\n",
                GetParam().schedule.c_str(), GetParam().precision.c_str(), r,
                static_cast<unsigned long long>(budget),
                static_cast<unsigned long long>(held[r].reports.back().summary.memory_peak_bytes()),
                static_cast<unsigned long long>(counted[r].reports.back().summary.memory_peak_bytes()));
  }
  EXPECT_GT(most_over, 0u) << "held tensors not handed off must show over the budget (else this test proves nothing)";
}

INSTANTIATE_TEST_SUITE_P(
    SomeSchedules, MemoryBudgetHeldSendsTest,
    ::testing::Values(Case{"1f1b", 4, 0, 8, 8, {}, "fp32"}, Case{"zbh1", 4, 0, 8, 8, {}, "bf16"},
                      Case{"interleaved", 2, 2, 4, 8, {}, "bf16"}, Case{"zbv", 2, 2, 4, 8, {}, "fp32"},
                      Case{"zbh2", 3, 0, 5, 7, {1, 4, 2}, "fp32"}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string name = info.param.schedule + "_" + info.param.precision + "_pp" + std::to_string(info.param.pp);
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

// The activations the budget adds on top of the weights are more than the recipe's saved
// tensors alone: B's transients and the tensors between stages count (a budget without them
// would be below what the pool reports, and every healthy cuda rank would raise MEMORY events).
TEST_F(MemoryBudgetCudaTestBase, TheBudgetCountsMoreThanTheSavedTensors) {
  const v1::JobSpec spec = jobplan::WithDefaults(Spec({"1f1b", 2, 0, 4, 4, {}, "bf16"}));
  auto plan = jobplan::PlanJob(spec);
  ASSERT_TRUE(plan.ok());
  const auto e = jobplan::EstimateRankMemory(spec, *plan);
  for (int r = 0; r < 2; ++r) {
    const jobplan::SavedBytes saved = jobplan::StageSavedBytes(spec, plan->shards(r));
    EXPECT_GT(e[r].activation_bytes, std::max(saved.after_f, saved.after_b));
  }
}

INSTANTIATE_TEST_SUITE_P(
    EverySchedule, MemoryBudgetCudaTest,
    ::testing::ValuesIn([] {
      std::vector<Case> cases;
      for (const char* precision : {"fp32", "bf16"}) {
        for (Case c : std::vector<Case>{
                 {"fthenb", 4, 0, 8, 8, {}, ""},      {"1f1b", 4, 0, 8, 8, {}, ""},
                 {"eager-1f1b", 4, 0, 8, 8, {}, ""},  {"interleaved", 2, 2, 4, 8, {}, ""},
                 {"looped-bfs", 2, 2, 4, 8, {}, ""},  {"zbh1", 4, 0, 8, 8, {}, ""},
                 {"zbh2", 4, 0, 8, 8, {}, ""},        {"zb-auto", 4, 0, 8, 8, {}, ""},
                 {"zbv", 2, 2, 4, 8, {}, ""},         {"v-half", 2, 2, 4, 8, {}, ""},
                 {"v-min", 2, 2, 4, 8, {}, ""},       {"dualpipev", 2, 2, 4, 8, {}, ""},
                 // Uneven layers and micro-batches; one rank holding the embedding and the head.
                 {"interleaved", 2, 2, 5, 7, {}, ""}, {"zbh2", 3, 0, 5, 7, {1, 4, 2}, ""},
                 {"1f1b", 1, 0, 3, 2, {}, ""},
                 // B's attention transients at its peak.
                 {"1f1b", 4, 0, 8, 8, {}, "", 64},    {"zbh1", 4, 0, 8, 8, {}, "", 64},
                 {"zbv", 2, 2, 4, 8, {}, "", 64},     {"interleaved", 2, 2, 4, 8, {}, "", 64},
                 // Data parallelism, and ZeRO-1's shards of the moments (3 replicas: shards of
                 // unequal length, the flat buffers of the longest on every replica).
                 {"1f1b", 2, 0, 4, 4, {}, "", 0, 2, 0}, {"1f1b", 2, 0, 4, 4, {}, "", 0, 2, 1},
                 {"zbv", 2, 2, 4, 8, {}, "", 0, 2, 1},  {"zbh1", 2, 0, 4, 5, {}, "", 0, 3, 1},
                 // Full recompute (B's rebuilt forward at its peak: f = h too); selective keeps
                 // none's bytes (flash attention).
                 {"1f1b", 4, 0, 8, 8, {}, "", 0, 1, 0, "full"},   {"zbh1", 4, 0, 8, 8, {}, "", 0, 1, 0, "full"},
                 {"zbv", 2, 2, 4, 8, {}, "", 0, 1, 0, "full"},    {"interleaved", 2, 2, 5, 7, {}, "", 64, 1, 0, "full"},
                 {"zbh1", 4, 0, 8, 8, {}, "", 64, 1, 0, "full"},  {"1f1b", 4, 0, 8, 8, {}, "", 0, 1, 0, "selective"},
                 {"1f1b", 2, 0, 4, 4, {}, "", 0, 2, 1, "full"},
                 // A numerical probe larger than a step's activations: its GEMM makes the peak.
                 {"1f1b", 2, 0, 2, 2, {}, "", 0, 1, 0, "none", 448},
                 // Tensor parallelism: the group's sums (the ring's chunks, bf16's f32 copies, the
                 // vocabulary-parallel loss's maxima and sums) on top of the slices.
                 {"1f1b", 2, 0, 4, 4, {}, "", 0, 1, 0, "none", 0, 2},
                 {"zbh1", 2, 0, 4, 4, {}, "", 64, 1, 0, "none", 0, 2},
                 {"zbv", 2, 2, 4, 8, {}, "", 0, 1, 0, "none", 0, 2},
                 {"1f1b", 2, 0, 4, 4, {}, "", 0, 2, 1, "full", 0, 2},
                 {"interleaved", 2, 2, 5, 7, {}, "", 0, 1, 0, "full", 0, 4},
                 {"1f1b", 1, 0, 2, 2, {}, "", 0, 1, 0, "none", 0, 2},
                 // And sequence parallelism: the partials before each reduce-scatter, the gathers
                 // in F, B and W (W's peak), the token-sharded norms and boundary tensors.
                 {"1f1b", 2, 0, 4, 4, {}, "", 0, 1, 0, "none", 0, 2, true},
                 {"zbh1", 2, 0, 4, 4, {}, "", 64, 1, 0, "none", 0, 2, true},
                 {"zbv", 2, 2, 4, 8, {}, "", 0, 1, 0, "none", 0, 2, true},
                 {"1f1b", 2, 0, 4, 4, {}, "", 0, 2, 1, "full", 0, 2, true},
                 {"interleaved", 2, 2, 5, 7, {}, "", 0, 1, 0, "full", 0, 4, true},
                 {"1f1b", 1, 0, 2, 2, {}, "", 0, 1, 0, "none", 0, 2, true},
                 // ZeRO-2: the whole gradients from each stage's first W or BW to OPT, the
                 // shard's (flat) outside; with tensor and sequence parallelism too.
                 {"1f1b", 2, 0, 4, 4, {}, "", 0, 2, 2}, {"zbv", 2, 2, 4, 8, {}, "", 0, 2, 2},
                 {"zbh1", 2, 0, 4, 5, {}, "", 0, 3, 2}, {"fthenb", 2, 0, 4, 4, {}, "", 0, 2, 2},
                 {"1f1b", 2, 0, 4, 4, {}, "", 0, 2, 2, "full", 0, 2, true},
                 // OPT at the peak: one short micro-batch, so the data-parallel ring's chunks of
                 // the gradients and parameters (and the norm's scratch) outweigh the activations.
                 {"1f1b", 1, 0, 1, 4, {}, "", 0, 2, 0, "none", 0, 1, false, 8, 1},
                 {"1f1b", 1, 0, 1, 4, {}, "", 0, 2, 1, "none", 0, 1, false, 8, 1},
                 {"1f1b", 1, 0, 1, 4, {}, "", 0, 3, 2, "none", 0, 1, false, 8, 1},
                 {"1f1b", 2, 0, 2, 4, {}, "", 0, 2, 1, "none", 0, 2, true, 8, 1},
                 // Grouped-query attention (2 key/value heads of 4: k, v, dk, dv and wk, wv half
                 // as wide) with head_dim 24 (q, o, dq, dout and wq, wo 96 wide for h 64); at f = h
                 // too (B's attention part at the peak), with tensor and sequence parallelism.
                 {"1f1b", 4, 0, 8, 8, {}, "", 0, 1, 0, "none", 0, 1, false, 40, 2, 2, 24},
                 {"zbv", 2, 2, 4, 8, {}, "", 64, 1, 0, "none", 0, 1, false, 40, 2, 2, 24},
                 {"zbh1", 2, 0, 4, 4, {}, "", 64, 1, 0, "full", 0, 1, false, 40, 2, 2, 24},
                 {"1f1b", 2, 0, 4, 4, {}, "", 0, 1, 0, "none", 0, 2, true, 40, 2, 2, 24},
                 // Qwen2's q, k, v biases: three more parameters per block (split under tp), and
                 // with ZeRO-1 in the flat shards.
                 {"zbh1", 2, 0, 4, 4, {}, "", 0, 1, 0, "none", 0, 2, false, 40, 2, 2, 0, true},
                 {"1f1b", 2, 0, 4, 4, {}, "", 0, 2, 1, "none", 0, 1, false, 40, 2, 2, 0, true},
                 // Tied embeddings: one tensor where a stage holds both ends (pp 1, ZeRO-1 too);
                 // the head's copy elsewhere, its gradient summed with the embedding's at OPT (an
                 // all-reduce of two ranks; on zbv's rank 0 an in-place sum through two copies);
                 // OPT at the peak (one short micro-batch) so the sum's transients are what count.
                 {"1f1b", 1, 0, 2, 2, {}, "", 0, 2, 1, "none", 0, 1, false, 40, 2, 0, 0, false, true},
                 {"1f1b", 2, 0, 4, 4, {}, "", 0, 1, 0, "none", 0, 1, false, 40, 2, 0, 0, false, true},
                 {"zbv", 2, 2, 4, 8, {}, "", 0, 1, 0, "none", 0, 1, false, 40, 2, 0, 0, false, true},
                 {"1f1b", 2, 0, 1, 4, {}, "", 0, 1, 0, "none", 0, 1, false, 8, 1, 0, 0, false, true},
                 {"zbv", 2, 2, 1, 4, {}, "", 0, 1, 0, "none", 0, 1, false, 8, 1, 0, 0, false, true},
                 {"1f1b", 2, 0, 1, 4, {}, "", 0, 2, 0, "none", 0, 2, false, 8, 1, 0, 0, false, true},
                 // A vocabulary of 1536: the sum's transients (the copy read out, the sum read
                 // back; the ring's chunk between two ranks) above the step's activations.
                 {"zbv", 2, 2, 1, 4, {}, "", 0, 1, 0, "none", 0, 1, false, 8, 1, 0, 0, false, true, 1536},
                 {"1f1b", 2, 0, 1, 4, {}, "", 0, 1, 0, "none", 0, 1, false, 8, 1, 0, 0, false, true, 1536},
                 // Mistral's sliding window with its GQA: flash attention allocates what it does
                 // without a window (at f = h too, B's attention part at the peak).
                 {"zbh1", 2, 0, 4, 4, {}, "", 64, 1, 0, "none", 0, 1, false, 40, 2, 2, 0, false, false, 96, 12}}) {
          c.precision = precision;
          cases.push_back(c);
        }
      }
      return cases;
    }()),
    [](const ::testing::TestParamInfo<Case>& info) {
      const Case& c = info.param;
      std::string name = c.schedule + "_" + c.precision + "_pp" + std::to_string(c.pp) + "_vpp" +
                         std::to_string(c.vpp) + "_m" + std::to_string(c.microbatches) + "_layers" +
                         std::to_string(c.layers) + (c.ffn > 0 ? "_ffn" + std::to_string(c.ffn) : "") +
                         (c.dp > 1 ? "_dp" + std::to_string(c.dp) + "_zero" + std::to_string(c.zero) : "") +
                         (c.recompute != "none" ? "_" + c.recompute : "") +
                         (c.tp > 1 ? "_tp" + std::to_string(c.tp) + (c.sp ? "_sp" : "") : "") +
                         (c.probe_size > 0 ? "_probe" + std::to_string(c.probe_size) : "") +
                         (c.seq != 40 ? "_seq" + std::to_string(c.seq) + "_b" + std::to_string(c.micro_batch_size) : "") +
                         (c.kv_heads > 0 ? "_kv" + std::to_string(c.kv_heads) : "") +
                         (c.head_dim > 0 ? "_hd" + std::to_string(c.head_dim) : "") + (c.qkv_bias ? "_qkvbias" : "") + (c.tied ? "_tied" : "") + (c.vocab != 96 ? "_v" + std::to_string(c.vocab) : "") +
                         (c.window > 0 ? "_window" + std::to_string(c.window) : "");
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

// The closing figure the report quotes.
class WorstErrorPrinter : public ::testing::Environment {
 public:
  void TearDown() override {
    if (peaks_compared == 0) {
      std::printf("no peak compared (skipped)\n");
      return;
    }
    std::printf("worst |peak - budget| over %lld (rank, step) peaks: %lld B\n", static_cast<long long>(peaks_compared),
                static_cast<long long>(worst_error));
  }
};
const ::testing::Environment* const kPrinter = ::testing::AddGlobalTestEnvironment(new WorstErrorPrinter);

}  // namespace
}  // namespace pipecoord::worker::cuda
