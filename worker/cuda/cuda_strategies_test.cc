// What the planner plans, on the CUDA backend, against the CPU backend's (which
// tensor_parallel_training_test and python/pipecoord's tests hold to a single-process run and to
// PyTorch's AdamW / clip_grad_norm_): the same job run once on CUDA ranks and once on CPU ranks,
// each rank an Executor over its backend, tensors between ranks through PoolTransport.
//
// ZeRO-1 with clipping (spec.zero 1 over dp replicas, a clipGradNorm that clips) and full
// activation recompute. Compared: every step's loss and global gradient norm (the head rank's
// report), and every tensor of every rank's checkpoint state after 3 steps, by name: the masters,
// and the AdamW moments of each replica's shard ("adam_m@begin", the CPU backend's names, so the
// set of names checks the shard geometry too). On the host double (the CPU twins behind every
// launcher) the two must be the same bits: same kernels, same ring orders, the norm summed in the
// CPU's order. On a GPU (gpu-tagged) within kFp32Tolerance (cuBLASLt sums in fp32, the norm's
// tree order differs).
//
// Negative controls: a CUDA run with zero 0 has whole moments (other names: the comparison would
// fail), and without clipping its weights differ from the clipped run's. Recompute must leave
// the results bit for bit those of none, on the GPU too (the same kernels on the same inputs),
// and time each rebuild inside its B on the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/rank_layout.h"
#include "data/byte_dataset_writer.h"
#include "data/hf_llama_weights.h"
#include "jobplan/hf_config.h"
#include "jobplan/assignment.h"
#include "jobplan/layout.h"
#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "worker/cuda/cuda_backend.h"
#include "worker/cuda/cuda_test_util.h"
#include "worker/cuda/rank_threads_for_tests.h"
#include "worker/daemon/backend_factory.h"
#include "worker/daemon/executor.h"
#include "worker/daemon/init_weights.h"
#include "worker/model/stage_model.h"

namespace pipecoord::worker::cuda {
namespace {

using kernels::cuda::CompareNormwise;

v1::JobSpec Spec(const std::string& device, int pp, int dp, int zero, double clip,
                 const std::string& schedule = "1f1b", const std::string& recompute = "none") {
  v1::JobSpec s;
  s.set_name("zero");
  s.set_schedule(schedule);
  s.set_recompute(recompute);
  if (schedule == "zbv" || schedule == "interleaved") s.set_vpp(2);
  s.set_device(device);
  s.set_pp(pp);
  s.set_dp(dp);
  s.set_zero(zero);
  s.set_microbatches(2);
  s.set_micro_batch_size(kTestMicroBatchSize);
  s.set_steps(3);
  s.set_learning_rate(1e-3);
  s.set_data_seed(5);
  s.mutable_optimizer()->set_clip_grad_norm(clip);
  s.mutable_optimizer()->set_weight_decay(0.1);
  SetTestModel(s.mutable_model());
  if (s.vpp() == 2) s.mutable_model()->set_layers(4);  // a block on every virtual stage
  return s;
}

struct RankResult {
  Status status;
  std::vector<StepReport> reports;
  std::map<std::string, std::vector<float>> state;  // CheckpointState after the last step
  int64_t optimizer_steps = 0;
};

// The job's ranks (RunRankThreads) on CUDA or CPU backends, each rank's state read at the end.
// `customize` may set the runner's start step and `built` (a restart's load).
std::vector<RankResult> RunJob(const v1::JobSpec& raw,
                               const std::function<void(const v1::JobSpec&, const v1::Plan&, RankSetup*)>& customize = {}) {
  const Status valid = jobplan::ValidateJobSpec(raw);
  EXPECT_TRUE(valid.ok()) << valid.ToString();
  const v1::JobSpec spec = jobplan::WithDefaults(raw);
  auto plan = jobplan::PlanJob(spec);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (!valid.ok() || !plan.ok()) return {};
  std::vector<RankResult> results(static_cast<size_t>(jobplan::LayoutOf(spec).world()));
  RankSetup setup;
  if (spec.device() == "cpu") {
    setup.backend = [](const v1::Assignment& a, std::shared_ptr<CudaDevice>, parallel::TensorParallel* tp) {
      return MakeBackend(a, tp);
    };
  }
  setup.after = [&](int g, ComputeBackend& backend) {
    for (const StateTensor& t : backend.CheckpointState()) {
      results[static_cast<size_t>(g)].state[t.name] = std::vector<float>(t.data.begin(), t.data.end());
    }
    results[static_cast<size_t>(g)].optimizer_steps = backend.optimizer_steps();
  };
  if (customize) customize(spec, *plan, &setup);
  const std::vector<RankOutcome> ranks = RunRankThreads(spec, *plan, setup);
  for (size_t g = 0; g < ranks.size(); ++g) {
    results[g].status = ranks[g].status;
    results[g].reports = ranks[g].reports;
  }
  return results;
}

std::vector<std::string> Names(const std::map<std::string, std::vector<float>>& state) {
  std::vector<std::string> out;
  for (const auto& [name, values] : state) out.push_back(name);
  return out;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Rank g's fp32 masters, whole, joined from its replicas' checkpoint states: whole "NAME/value"
// entries, or (bf16 under ZeRO) each replica's "NAME/value@B" pieces (elements [B, B + n)). An
// element two pieces hold must be the same bits in both; one no piece holds fails the test.
std::map<std::string, std::vector<float>> JoinedValues(const std::vector<RankResult>& ranks, const RankLayout& layout,
                                                       int g) {
  std::map<std::string, std::vector<float>> out;
  std::map<std::string, std::vector<bool>> seen;
  for (int d = 0; d < layout.dp(); ++d) {
    for (const auto& [name, values] : ranks.at(static_cast<size_t>(layout.AtDataRank(g, d))).state) {
      const size_t at = name.rfind('@');
      const std::string base = name.substr(0, at);
      if (!base.ends_with("/value")) continue;
      const size_t first = at == std::string::npos ? 0 : std::stoul(name.substr(at + 1));
      std::vector<float>& whole = out[base];
      std::vector<bool>& held = seen[base];
      if (whole.size() < first + values.size()) {
        whole.resize(first + values.size());
        held.resize(first + values.size(), false);
      }
      for (size_t i = 0; i < values.size(); ++i) {
        if (held[first + i]) {
          EXPECT_EQ(std::memcmp(&whole[first + i], &values[i], sizeof(float)), 0) << base << " element " << first + i;
        }
        whole[first + i] = values[i];
        held[first + i] = true;
      }
    }
  }
  for (const auto& [base, held] : seen) {
    EXPECT_EQ(std::count(held.begin(), held.end(), false), 0) << base << ": elements no replica holds";
  }
  return out;
}

// The CUDA run's losses, norms and states against the CPU run's; returns the worst normwise
// error of a state tensor.
double ExpectSameRun(const std::vector<RankResult>& cuda, const std::vector<RankResult>& cpu, int pp) {
  EXPECT_EQ(cuda.size(), cpu.size());
  double worst = 0;
  int losses = 0;
  for (size_t g = 0; g < cuda.size() && g < cpu.size(); ++g) {
    SCOPED_TRACE("global rank " + std::to_string(g));
    EXPECT_TRUE(cuda[g].status.ok()) << cuda[g].status.ToString();
    EXPECT_TRUE(cpu[g].status.ok()) << cpu[g].status.ToString();
    EXPECT_EQ(Names(cuda[g].state), Names(cpu[g].state)) << "the checkpoint's names (and so ZeRO's shards) differ";
    for (const auto& [name, want] : cpu[g].state) {
      auto it = cuda[g].state.find(name);
      if (it == cuda[g].state.end()) continue;
      if (kFp32Tolerance == 0) {
        EXPECT_TRUE(SameBits(it->second, want)) << name << ": " << CompareNormwise(it->second, want).Describe();
      } else {
        const auto e = CompareNormwise(it->second, want);
        worst = std::max(worst, e.error);
        EXPECT_LE(e.error, kFp32Tolerance) << name << ": " << e.Describe();
      }
    }
    EXPECT_EQ(cuda[g].reports.size(), cpu[g].reports.size());
    for (size_t step = 0; step < cuda[g].reports.size() && step < cpu[g].reports.size(); ++step) {
      const v1::StepSummary& c = cuda[g].reports[step].summary;
      const v1::StepSummary& w = cpu[g].reports[step].summary;
      // The rank holding the head reports the loss (the last rank, or rank 0 on a V schedule).
      EXPECT_EQ(c.has_loss(), w.has_loss()) << "step " << step;
      if (!c.has_loss() || !w.has_loss()) continue;
      ++losses;
      EXPECT_TRUE(c.has_grad_norm()) << "the CUDA backend reports the step's gradient norm";
      if (kFp32Tolerance == 0) {
        EXPECT_EQ(c.loss(), w.loss()) << "step " << step;
        EXPECT_EQ(c.grad_norm(), w.grad_norm()) << "step " << step;
      } else {
        EXPECT_LE(RelativeError(c.loss(), w.loss()), kFp32Tolerance) << "step " << step;
        EXPECT_LE(RelativeError(c.grad_norm(), w.grad_norm()), kFp32Tolerance) << "step " << step;
      }
    }
  }
  EXPECT_EQ(losses, static_cast<int>(cpu.empty() ? 0 : cpu[0].reports.size()) * static_cast<int>(cpu.size()) / pp)
      << "every step's loss, from one rank per replica";
  return worst;
}

struct Case {
  int pp, dp;
};

class CudaZeroTest : public CudaModelTestBase, public ::testing::WithParamInterface<Case> {};

TEST_P(CudaZeroTest, ZeroOneWithClippingEqualsTheCpuBackends) {
  const Case& c = GetParam();
  constexpr double kClip = 0.05;
  const std::vector<RankResult> cuda = RunJob(Spec("cuda", c.pp, c.dp, 1, kClip));
  const std::vector<RankResult> cpu = RunJob(Spec("cpu", c.pp, c.dp, 1, kClip));
  ASSERT_EQ(cuda.size(), static_cast<size_t>(c.pp * c.dp));
  const double worst = ExpectSameRun(cuda, cpu, c.pp);
  // The clip bit: every step's norm is above kClip, so clipping scaled the gradients.
  for (const StepReport& r : cpu[c.pp - 1].reports) EXPECT_GT(r.summary.grad_norm(), kClip);
  // Each replica holds a shard: its moments cover part of the stage only (a tensor wholly inside
  // the shard keeps its whole name, as on the CPU), and the replicas' shards together cover every
  // element once.
  for (int rank = 0; rank < c.pp; ++rank) {
    std::map<std::string, size_t> moments, values;  // by tensor name: elements over the replicas
    size_t all_values = 0;
    for (int d = 0; d < c.dp; ++d) {
      size_t mine = 0;
      for (const auto& [name, v] : cuda[d * c.pp + rank].state) {
        const size_t at = name.find("/adam_m");
        if (at != std::string::npos) {
          moments[name.substr(0, at)] += v.size();
          mine += v.size();
        } else if (name.size() > 6 && name.substr(name.size() - 6) == "/value" && d == 0) {
          values[name.substr(0, name.size() - 6)] = v.size();
          all_values += v.size();
        }
      }
      EXPECT_LE(mine, (all_values + c.dp - 1) / c.dp) << "replica " << d << " keeps more than its shard";
    }
    for (const auto& [tensor, n] : values) EXPECT_EQ(moments[tensor], n) << tensor;
  }
  std::printf("pp %d dp %d zero 1 clip %.2g: CUDA %s the CPU backend (worst state error %.3g)\n", c.pp, c.dp, kClip,
              kFp32Tolerance == 0 ? "bit-identical to" : "within tolerance of", worst);
}

INSTANTIATE_TEST_SUITE_P(Layouts, CudaZeroTest, ::testing::Values(Case{2, 2}, Case{1, 3}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return "pp" + std::to_string(info.param.pp) + "_dp" + std::to_string(info.param.dp);
                         });

using CudaZeroControlTest = CudaModelTestBase;

// ZeRO-2 on CUDA ranks (the gradients too kept for the shard only outside the step's backward
// passes): the CPU backend's ZeRO-2 bit for bit on the host double, with clipping, with and
// without the B/W split; and the same weights as ZeRO-1 (where the gradients live changes no
// number).
TEST_F(CudaZeroControlTest, ZeroTwoEqualsTheCpuBackendsAndZeroOne) {
  constexpr double kClip = 0.05;
  for (const std::string schedule : {"1f1b", "zbh1"}) {
    for (const Case c : {Case{2, 2}, Case{1, 3}}) {
      SCOPED_TRACE(schedule + " pp " + std::to_string(c.pp) + " dp " + std::to_string(c.dp));
      const std::vector<RankResult> cuda = RunJob(Spec("cuda", c.pp, c.dp, 2, kClip, schedule));
      const std::vector<RankResult> cpu = RunJob(Spec("cpu", c.pp, c.dp, 2, kClip, schedule));
      const std::vector<RankResult> one = RunJob(Spec("cuda", c.pp, c.dp, 1, kClip, schedule));
      ExpectSameRun(cuda, cpu, c.pp);
      ASSERT_EQ(one.size(), cuda.size());
      for (size_t g = 0; g < cuda.size(); ++g) {
        EXPECT_EQ(Names(one[g].state), Names(cuda[g].state));
        for (const auto& [name, v] : one[g].state) {
          EXPECT_TRUE(SameBits(cuda[g].state.at(name), v)) << "rank " << g << " " << name;
        }
      }
    }
  }
}

// ZeRO-1 changes where the moments live, not the numbers: with two replicas (whose sums of two
// are the same bits in either order) a zero-1 run equals the zero-0 run, in bf16 too (the bf16
// copies re-rounded after the all-gather). Its states differ in name only (whole vs shards).
TEST_F(CudaZeroControlTest, ZeroOneEqualsZeroZeroAndClippingMatters) {
  for (const std::string precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    v1::JobSpec one = Spec("cuda", 2, 2, 1, 0), none = Spec("cuda", 2, 2, 0, 0);
    one.set_precision(precision);
    none.set_precision(precision);
    const std::vector<RankResult> a = RunJob(one), b = RunJob(none);
    ASSERT_EQ(a.size(), 4u);
    ASSERT_EQ(b.size(), 4u);
    const RankLayout layout = jobplan::LayoutOf(jobplan::WithDefaults(one));
    for (size_t g = 0; g < a.size(); ++g) {
      ASSERT_TRUE(a[g].status.ok()) << a[g].status.ToString();
      ASSERT_TRUE(b[g].status.ok()) << b[g].status.ToString();
    }
    for (size_t g = 0; g < a.size(); ++g) {
      EXPECT_NE(Names(a[g].state), Names(b[g].state)) << "zero 0 keeps whole moments";
      // bf16 keeps the shard's fp32 masters only ("value@B", about half of them with dp 2),
      // fp32 every master (the kernels read them); joined over the replicas, zero 0's.
      const std::map<std::string, std::vector<float>> joined = JoinedValues(a, layout, static_cast<int>(g));
      size_t held = 0, whole = 0;
      for (const auto& [name, v] : a[g].state) held += name.find("/value") != std::string::npos ? v.size() : 0;
      for (const auto& [name, v] : b[g].state) {
        if (name.find("/value") == std::string::npos) continue;
        whole += v.size();
        ASSERT_TRUE(joined.count(name)) << name;
        const auto e = CompareNormwise(joined.at(name), v);
        EXPECT_EQ(joined.at(name).size(), v.size()) << name;
        EXPECT_LE(e.error, kFp32Tolerance == 0 ? 0.0 : 1e-6) << name << ": " << e.Describe();
      }
      if (precision == "bf16") {
        EXPECT_GE(held, whole / 2) << "rank " << g;
        EXPECT_LE(held, (whole + 1) / 2) << "rank " << g << ": the fp32 masters are not sharded";
      } else {
        EXPECT_EQ(held, whole) << "rank " << g;
      }
    }
    for (size_t step = 0; step < 3; ++step) {
      ASSERT_TRUE(a[1].reports.at(step).summary.has_loss());
      EXPECT_EQ(a[1].reports.at(step).summary.loss(), b[1].reports.at(step).summary.loss()) << "step " << step;
    }
  }
  // The negative control: the clipped run's weights are not the unclipped run's.
  const std::vector<RankResult> clipped = RunJob(Spec("cuda", 2, 2, 1, 0.05)), free = RunJob(Spec("cuda", 2, 2, 1, 0));
  ASSERT_EQ(clipped.size(), 4u);
  ASSERT_EQ(free.size(), 4u);
  const std::string w = "stage1/output.weight/value";
  ASSERT_TRUE(clipped[1].state.count(w) && free[1].state.count(w));
  EXPECT_GT(CompareNormwise(clipped[1].state.at(w), free[1].state.at(w)).error, 1e-3);
}

// bf16 under ZeRO keeps each replica's shard of the fp32 masters only, so a load (a restart's
// checkpoint, spec.init) writes the shard's and the executor all-gathers the bf16 copies before
// the first step (ComputeBackend::ValuesNeedGather). Resumed at step 2 from the state each rank
// held after step 1 (set into its CheckpointState views by name, as a checkpoint read does), the
// job equals the uninterrupted one bit for bit: step 2's loss and norm and every state tensor.
// Without the gather the resumed forward would read the initial weights outside the shard.
// dp 2 and dp 3 (shards of unequal length, cutting tensors).
TEST_F(CudaZeroControlTest, BfloatShardedMastersResumeBitForBit) {
  for (const Case c : {Case{2, 2}, Case{1, 3}}) {
    SCOPED_TRACE("pp " + std::to_string(c.pp) + " dp " + std::to_string(c.dp));
    v1::JobSpec spec = Spec("cuda", c.pp, c.dp, 1, 0.05);
    spec.set_precision("bf16");
    v1::JobSpec head = spec;
    head.set_steps(2);
    const std::vector<RankResult> whole = RunJob(spec), before = RunJob(head);
    const std::vector<RankResult> resumed =
        RunJob(spec, [&](const v1::JobSpec&, const v1::Plan&, RankSetup* setup) {
          setup->start_step = 2;
          setup->built = [&](int g, ComputeBackend& backend) {
            const RankResult& saved = before.at(static_cast<size_t>(g));
            for (const StateTensor& t : backend.CheckpointState()) {
              const std::vector<float>& v = saved.state.at(t.name);
              ASSERT_EQ(v.size(), t.data.size()) << t.name;
              std::copy(v.begin(), v.end(), t.data.begin());
            }
            backend.set_optimizer_steps(saved.optimizer_steps);
          };
        });
    ASSERT_EQ(resumed.size(), whole.size());
    int losses = 0;
    for (size_t g = 0; g < whole.size(); ++g) {
      SCOPED_TRACE("global rank " + std::to_string(g));
      ASSERT_TRUE(whole[g].status.ok()) << whole[g].status.ToString();
      ASSERT_TRUE(before[g].status.ok()) << before[g].status.ToString();
      ASSERT_TRUE(resumed[g].status.ok()) << resumed[g].status.ToString();
      EXPECT_EQ(before[g].optimizer_steps, 2);
      ASSERT_EQ(resumed[g].reports.size(), 1u);
      ASSERT_EQ(whole[g].reports.size(), 3u);
      const v1::StepSummary& r = resumed[g].reports[0].summary;
      const v1::StepSummary& w = whole[g].reports[2].summary;
      EXPECT_EQ(r.step(), 2);
      EXPECT_EQ(r.has_loss(), w.has_loss());
      if (r.has_loss() && w.has_loss()) {
        ++losses;
        EXPECT_EQ(r.loss(), w.loss());
        EXPECT_EQ(r.grad_norm(), w.grad_norm());
      }
      EXPECT_EQ(Names(resumed[g].state), Names(whole[g].state));
      EXPECT_TRUE(std::any_of(whole[g].state.begin(), whole[g].state.end(),
                              [](const auto& e) { return e.first.find("/value@") != std::string::npos; }))
          << "bf16 ZeRO-1 holds master shards";
      for (const auto& [name, v] : whole[g].state) {
        EXPECT_TRUE(SameBits(resumed[g].state.at(name), v)) << name;
      }
    }
    EXPECT_EQ(losses, c.dp);
  }
}

// spec.init on bf16 ZeRO ranks: each replica writes its shard of the fp32 masters
// ("value@B", cut from the whole tensor the folder holds) and the executor all-gathers the bf16
// copies before step 0. A job of seed 5 started from a Hugging Face folder holding seed 7's
// initial weights equals the job of seed 7 bit for bit (losses, norms, every state tensor), on
// dp 2 and dp 3; the seed-5 job without the folder is another run (the control).
TEST_F(CudaZeroControlTest, BfloatShardedMastersStartFromSpecInit) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string folder = std::string(tmp != nullptr ? tmp : "/tmp") + "/sharded_init";
  model::ModelConfig config = TestConfig();
  config.seed = 7;
  auto whole = model::StageModel::Create(config, model::WholeModel(config), {kTestMicroBatchSize, config.seq_len});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  std::vector<data::ModelTensor> tensors;
  for (const model::ParameterRef& p : (*whole)->Parameters()) tensors.push_back({std::string(p.name), p.value});
  const data::LlamaShape shape{config.layers, config.hidden, config.heads, config.FfnHidden(), config.vocab,
                               config.KvHeads()};
  v1::JobSpec probe = Spec("cuda", 1, 1, 0, 0);
  ASSERT_TRUE(data::WriteHfLlamaFolder(folder, jobplan::HfConfigJson(probe.model()), shape, tensors, 0).ok());
  for (const Case c : {Case{2, 2}, Case{1, 3}}) {
    SCOPED_TRACE("pp " + std::to_string(c.pp) + " dp " + std::to_string(c.dp));
    v1::JobSpec seven = Spec("cuda", c.pp, c.dp, 1, 0.05);
    seven.set_precision("bf16");
    seven.mutable_model()->set_seed(7);
    v1::JobSpec five = seven;
    five.mutable_model()->set_seed(5);
    v1::JobSpec init = five;
    init.set_init(folder);
    const std::vector<RankResult> want = RunJob(seven), other = RunJob(five);
    const std::vector<RankResult> got = RunJob(init, [&](const v1::JobSpec& spec, const v1::Plan& plan, RankSetup* setup) {
      setup->built = [&spec, &plan](int g, ComputeBackend& backend) {
        const v1::Assignment a = jobplan::BuildAssignment(spec.name(), spec, plan, g, {}, 1);
        const Status st = LoadInitialWeights(a, &backend);
        ASSERT_TRUE(st.ok()) << st.ToString();
      };
    });
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(other.size(), want.size());
    bool differs = false;
    for (size_t g = 0; g < want.size(); ++g) {
      SCOPED_TRACE("global rank " + std::to_string(g));
      ASSERT_TRUE(got[g].status.ok()) << got[g].status.ToString();
      ASSERT_TRUE(want[g].status.ok()) << want[g].status.ToString();
      ASSERT_EQ(got[g].reports.size(), want[g].reports.size());
      for (size_t step = 0; step < want[g].reports.size(); ++step) {
        const v1::StepSummary& a = got[g].reports[step].summary;
        const v1::StepSummary& b = want[g].reports[step].summary;
        EXPECT_EQ(a.loss(), b.loss()) << "step " << step;
        EXPECT_EQ(a.grad_norm(), b.grad_norm()) << "step " << step;
        if (b.has_loss() && other[g].reports.at(step).summary.loss() != b.loss()) differs = true;
      }
      EXPECT_EQ(Names(got[g].state), Names(want[g].state));
      for (const auto& [name, v] : want[g].state) EXPECT_TRUE(SameBits(got[g].state.at(name), v)) << name;
    }
    EXPECT_TRUE(differs) << "the seed-5 job must be another run, or the comparison proves nothing";
  }
}

// Full recompute on CUDA: the same bits as none (and as the CPU backend's full recompute), in
// fp32 and bf16, on schedules with and without the B/W split; each B (or BW) of a block-holding
// stage reports the rebuilt forwards' device time, inside its own span.
TEST_F(CudaZeroControlTest, FullRecomputeChangesNoBitAndIsTimedInsideB) {
  for (const std::string schedule : {"1f1b", "zbh1", "zbv"}) {
    for (const std::string precision : {"fp32", "bf16"}) {
      SCOPED_TRACE(schedule + " " + precision);
      v1::JobSpec full = Spec("cuda", 2, 1, 0, 0, schedule, "full"), none = Spec("cuda", 2, 1, 0, 0, schedule);
      full.set_precision(precision);
      none.set_precision(precision);
      const std::vector<RankResult> a = RunJob(full), b = RunJob(none);
      ASSERT_EQ(a.size(), 2u);
      ASSERT_EQ(b.size(), 2u);
      for (size_t g = 0; g < a.size(); ++g) {
        ASSERT_TRUE(a[g].status.ok()) << a[g].status.ToString();
        ASSERT_TRUE(b[g].status.ok()) << b[g].status.ToString();
        EXPECT_EQ(Names(a[g].state), Names(b[g].state));
        for (const auto& [name, v] : b[g].state) {
          EXPECT_TRUE(SameBits(a[g].state.at(name), v)) << name << ": "
                                                        << CompareNormwise(a[g].state.at(name), v).Describe();
        }
        ASSERT_EQ(a[g].reports.size(), b[g].reports.size());
        int timed = 0;
        for (size_t step = 0; step < a[g].reports.size(); ++step) {
          for (const v1::ActionTiming& t : a[g].reports[step].actions) {
            const v1::Op op = t.action().op();
            if (op != v1::B && op != v1::BW) {
              EXPECT_EQ(t.recompute_ns(), 0) << v1::Op_Name(op);
              continue;
            }
            ++timed;
            EXPECT_GT(t.recompute_ns(), 0) << "step " << step << " " << v1::Op_Name(op) << " mb "
                                           << t.action().microbatch();
            EXPECT_LE(t.recompute_ns(), t.end_ns() - t.start_ns());
          }
          for (const v1::ActionTiming& t : b[g].reports[step].actions) EXPECT_EQ(t.recompute_ns(), 0);
        }
        EXPECT_GT(timed, 0);
      }
      int losses = 0;
      for (size_t g = 0; g < a.size(); ++g) {
        for (size_t step = 0; step < 3; ++step) {
          const v1::StepSummary& x = a[g].reports.at(step).summary;
          const v1::StepSummary& y = b[g].reports.at(step).summary;
          ASSERT_EQ(x.has_loss(), y.has_loss());
          if (!x.has_loss()) continue;
          ++losses;
          EXPECT_EQ(x.loss(), y.loss()) << "rank " << g << " step " << step;
        }
      }
      EXPECT_EQ(losses, 3);
    }
  }
  // And against the CPU backend's full recompute (with ZeRO-1 and clipping on two replicas).
  const std::vector<RankResult> cuda = RunJob(Spec("cuda", 2, 2, 1, 0.05, "zbh1", "full"));
  const std::vector<RankResult> cpu = RunJob(Spec("cpu", 2, 2, 1, 0.05, "zbh1", "full"));
  ExpectSameRun(cuda, cpu, 2);
}

// Tensor parallelism on CUDA ranks (Megatron's f/g all-reduces on the device tensors, or with
// sequence parallelism the gathers and reduce-scatters around each region and W's gathers again,
// the vocabulary-parallel embedding, head and cross-entropy) against the CPU backend's tensor
// parallelism (tensor_parallel_training_test holds that to a single-process run): tp 2 x pp 2,
// with two replicas, ZeRO-1, clipping and full recompute, on schedules with and without the B/W
// split. Every rank's slices, moments, losses and gradient norms: the same bits on the host double.
TEST_F(CudaZeroControlTest, TensorParallelEqualsTheCpuBackends) {
  struct TpCase {
    std::string schedule;
    int dp, zero;
    double clip;
    std::string recompute;
    bool sp;
  };
  for (const TpCase& c : {TpCase{"1f1b", 1, 0, 0, "none", false}, TpCase{"zbh1", 2, 1, 0.05, "full", false},
                          TpCase{"zbv", 1, 0, 0.05, "none", false}, TpCase{"1f1b", 1, 0, 0.05, "none", true},
                          TpCase{"zbh1", 2, 1, 0.05, "full", true}, TpCase{"zbv", 1, 0, 0, "none", true},
                          TpCase{"1f1b", 2, 2, 0.05, "none", true}}) {
    SCOPED_TRACE(c.schedule + " dp " + std::to_string(c.dp) + " zero " + std::to_string(c.zero) + " " + c.recompute +
                 (c.sp ? " sp" : ""));
    v1::JobSpec cuda_spec = Spec("cuda", 2, c.dp, c.zero, c.clip, c.schedule, c.recompute);
    v1::JobSpec cpu_spec = Spec("cpu", 2, c.dp, c.zero, c.clip, c.schedule, c.recompute);
    cuda_spec.set_tp(2);
    cpu_spec.set_tp(2);
    cuda_spec.set_sequence_parallel(c.sp);
    cpu_spec.set_sequence_parallel(c.sp);
    const std::vector<RankResult> cuda = RunJob(cuda_spec), cpu = RunJob(cpu_spec);
    ASSERT_EQ(cuda.size(), static_cast<size_t>(4 * c.dp));
    const double worst = ExpectSameRun(cuda, cpu, 2);
    // Each rank holds its slices: the two ranks of a group hold different halves of wq.
    const std::string wq = "stage0/layers.0.attention.wq.weight/value";
    ASSERT_TRUE(cuda[0].state.count(wq) && cuda[1].state.count(wq));
    EXPECT_EQ(cuda[0].state.at(wq).size(), 64u * 64u / 2);
    EXPECT_FALSE(SameBits(cuda[0].state.at(wq), cuda[1].state.at(wq)));
    std::printf("tp 2%s pp 2 dp %d %s zero %d recompute %s: CUDA %s the CPU backend (worst state error %.3g)\n",
                c.sp ? "+sp" : "", c.dp, c.schedule.c_str(), c.zero, c.recompute.c_str(),
                kFp32Tolerance == 0 ? "bit-identical to" : "within tolerance of", worst);
  }
}

// The same model at tp 1 and tp 2 (an independent check of the slicing and the group's sums: the
// tp 2 run adds in another order, so equal to rounding), fp32 and bf16. (That a block without the
// sums is far off: transformer_block_tp_test's negative control.)
TEST_F(CudaZeroControlTest, TensorParallelTrainsTheSameModelAsTpOne) {
  for (const std::string precision : {"fp32", "bf16"}) {
   for (const bool sp : {false, true}) {
    SCOPED_TRACE(precision + (sp ? " sp" : ""));
    v1::JobSpec one = Spec("cuda", 2, 1, 0, 0), two = Spec("cuda", 2, 1, 0, 0);
    one.set_precision(precision);
    two.set_precision(precision);
    two.set_tp(2);
    two.set_sequence_parallel(sp);
    const std::vector<RankResult> a = RunJob(one), b = RunJob(two);
    ASSERT_EQ(a.size(), 2u);
    ASSERT_EQ(b.size(), 4u);
    const double tolerance = precision == "fp32" ? 1e-5 : 2e-2;
    for (size_t step = 0; step < 3; ++step) {
      const v1::StepSummary& x = a[1].reports.at(step).summary;
      for (int t = 0; t < 2; ++t) {  // both ranks of the head's group report the same loss
        const v1::StepSummary& y = b[2 + t].reports.at(step).summary;
        ASSERT_TRUE(x.has_loss() && y.has_loss());
        EXPECT_LE(RelativeError(y.loss(), x.loss()), tolerance) << "step " << step << " tp rank " << t;
        EXPECT_LE(RelativeError(y.grad_norm(), x.grad_norm()), tolerance * 10) << "step " << step;
      }
      EXPECT_EQ(b[2].reports.at(step).summary.loss(), b[3].reports.at(step).summary.loss());
    }
   }
  }
}

// Tied embeddings (spec.model.tiedEmbeddings, Llama 3.2) on CUDA ranks: the embedding's gradient
// and the head copy's summed on the device at OPT (an all-reduce of the embedding group between
// two ranks; on a V schedule's rank 0, which holds both ends, added in place), with data and
// tensor parallelism and clipping (the norm counts the matrix once): the CPU backend's run bit
// for bit on the host double, both copies equal after every step. Negative control: an untied
// run's weights differ (the tie changes the numbers the comparison sees).
TEST_F(CudaZeroControlTest, TiedEmbeddingsEqualTheCpuBackends) {
  struct TiedCase {
    std::string schedule;
    int pp, dp, tp;
    double clip;
  };
  for (const TiedCase& c : {TiedCase{"1f1b", 2, 1, 1, 0.05}, TiedCase{"zbv", 2, 1, 1, 0}, TiedCase{"1f1b", 2, 2, 1, 0},
                            TiedCase{"zbh1", 2, 1, 2, 0.05}, TiedCase{"1f1b", 1, 2, 1, 0.05}}) {
    SCOPED_TRACE(c.schedule + " pp " + std::to_string(c.pp) + " dp " + std::to_string(c.dp) + " tp " +
                 std::to_string(c.tp));
    v1::JobSpec cuda_spec = Spec("cuda", c.pp, c.dp, 0, c.clip, c.schedule);
    v1::JobSpec cpu_spec = Spec("cpu", c.pp, c.dp, 0, c.clip, c.schedule);
    for (v1::JobSpec* s : {&cuda_spec, &cpu_spec}) {
      s->mutable_model()->set_tied_embeddings(true);
      s->set_tp(c.tp);
    }
    const std::vector<RankResult> cuda = RunJob(cuda_spec), cpu = RunJob(cpu_spec);
    ASSERT_EQ(cuda.size(), static_cast<size_t>(c.pp * c.dp * c.tp));
    const double worst = ExpectSameRun(cuda, cpu, c.pp);
    // The embedding (stage 0) and the head's copy (the last stage) hold the same values.
    const int last = c.schedule == "zbv" ? 2 * c.pp - 1 : c.pp - 1;
    std::vector<float> embedding, copy;
    for (const RankResult& r : cuda) {
      for (const auto& [name, v] : r.state) {
        if (name == "stage0/tok_embeddings.weight/value") embedding = v;
        if (name == "stage" + std::to_string(last) + "/output.weight/value") copy = v;
      }
      if (!embedding.empty()) break;
    }
    if (c.pp > 1) {
      for (const RankResult& r : cuda) {
        auto it = r.state.find("stage" + std::to_string(last) + "/output.weight/value");
        if (it != r.state.end()) {
          copy = it->second;
          break;
        }
      }
      ASSERT_FALSE(embedding.empty());
      ASSERT_FALSE(copy.empty());
      EXPECT_TRUE(SameBits(embedding, copy)) << "the copy left the embedding: " << CompareNormwise(copy, embedding).Describe();
    }
    std::printf("tied %s pp %d dp %d tp %d clip %.2g: CUDA %s the CPU backend (worst state error %.3g)\n",
                c.schedule.c_str(), c.pp, c.dp, c.tp, c.clip,
                kFp32Tolerance == 0 ? "bit-identical to" : "within tolerance of", worst);
  }
  // Negative control: untied, the same job trains other weights.
  v1::JobSpec tied = Spec("cuda", 2, 1, 0, 0), untied = Spec("cuda", 2, 1, 0, 0);
  tied.mutable_model()->set_tied_embeddings(true);
  const std::vector<RankResult> a = RunJob(tied), b = RunJob(untied);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_NE(a[1].reports.back().summary.loss(), b[1].reports.back().summary.loss());
}

// Validation (spec.evalEvery) on CUDA ranks: the held-out batches of a byte-level dataset through
// each stage's F, nothing kept: every validation loss equals the CPU backend's (bit for bit on
// the host double), and the weights after the run equal a run that never validated.
TEST_F(CudaZeroControlTest, ValidationEqualsTheCpuBackendsAndTouchesNoWeight) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/cuda-validation";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string text;
  for (int i = 0; i < 400; ++i) text += "a bubble of " + std::to_string(i % 13) + " micro-batches waits for its peer.\n";
  std::ofstream(dir + "/in.txt") << text;
  data::ByteDatasetOptions o;
  o.inputs = {dir + "/in.txt"};
  o.out_dir = dir + "/text";
  o.val_fraction = 0.2;
  ASSERT_TRUE(data::WriteByteDataset(o).ok());
  auto with_data = [&](v1::JobSpec s, bool validate) {
    s.mutable_model()->set_vocab(256);
    s.mutable_data()->set_path(dir + "/text");
    if (validate) {
      s.set_eval_every(1);
      s.set_eval_batches(2);
    }
    return s;
  };
  for (const std::string schedule : {"1f1b", "zbv"}) {
    SCOPED_TRACE(schedule);
    const std::vector<RankResult> cuda = RunJob(with_data(Spec("cuda", 2, 2, 0, 0, schedule), true));
    const std::vector<RankResult> cpu = RunJob(with_data(Spec("cpu", 2, 2, 0, 0, schedule), true));
    const std::vector<RankResult> quiet = RunJob(with_data(Spec("cuda", 2, 2, 0, 0, schedule), false));
    ExpectSameRun(cuda, cpu, 2);
    ASSERT_EQ(quiet.size(), cuda.size());
    int validated = 0;
    for (size_t g = 0; g < cuda.size(); ++g) {
      ASSERT_TRUE(quiet[g].status.ok()) << quiet[g].status.ToString();
      for (const auto& [name, v] : quiet[g].state) EXPECT_TRUE(SameBits(cuda[g].state.at(name), v)) << name;
      for (size_t step = 0; step < cuda[g].reports.size() && step < cpu[g].reports.size(); ++step) {
        const v1::StepSummary& c = cuda[g].reports[step].summary;
        const v1::StepSummary& w = cpu[g].reports[step].summary;
        EXPECT_EQ(c.has_val_loss(), w.has_val_loss()) << "rank " << g << " step " << step;
        if (!c.has_val_loss() || !w.has_val_loss()) continue;
        ++validated;
        if (kFp32Tolerance == 0) {
          EXPECT_EQ(c.val_loss(), w.val_loss()) << "rank " << g << " step " << step;
        } else {
          EXPECT_LE(RelativeError(c.val_loss(), w.val_loss()), kFp32Tolerance) << "rank " << g << " step " << step;
        }
      }
    }
    EXPECT_GT(validated, 0) << "no step validated";
  }
}

}  // namespace
}  // namespace pipecoord::worker::cuda
