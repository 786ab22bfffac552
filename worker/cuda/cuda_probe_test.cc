// The numerical probe on the CUDA backend (issue: checks that see the machine): the known-answer
// GEMM runs through the GemmContext the stages train with, on the rank's device (fp32 jobs its F
// GEMM, bf16 jobs its bf16 tensor-core W GEMM), and the `corrupt` fault reaches that same unit.
//
// Compared against kernels/cpu/known_answer_gemm.h's KnownAnswerChecksum, which the coordinator
// computes from the seed alone in O(mk + nk) (never the product): a healthy kernel reports it
// exactly, in either precision, whatever its summation order (the inputs are small integers).
// End to end in-process: CUDA ranks with the worker's HealthHooks and `corrupt:1:1` report wrong
// probe checksums on rank 1 from step 1 on (rank 0 stays right), and their losses leave the clean
// run's.
//
// Built twice: on a GPU (gpu-tagged, skips without one) and on the host double (_host).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "jobplan/assignment.h"
#include "jobplan/plan_job.h"
#include "jobplan/probe_placement.h"
#include "jobplan/spec_validation.h"
#include "kernels/cpu/known_answer_gemm.h"
#include "kernels/cpu/linear.h"
#include "worker/cuda/cuda_backend.h"
#include "worker/cuda/cuda_test_util.h"
#include "worker/cuda/rank_threads_for_tests.h"
#include "worker/daemon/executor.h"
#include "worker/daemon/fault_injection.h"
#include "worker/daemon/health_hooks.h"

namespace pipecoord::worker::cuda {
namespace {

v1::JobSpec Spec(const std::string& precision, int probe_size) {
  v1::JobSpec s;
  s.set_name("probe");
  s.set_schedule("1f1b");
  s.set_device("cuda");
  s.set_precision(precision);
  s.set_pp(2);
  s.set_microbatches(4);
  s.set_micro_batch_size(kTestMicroBatchSize);
  s.set_steps(4);
  s.set_learning_rate(1e-3);
  s.set_data_seed(5);
  s.mutable_health()->set_probe_size(probe_size);
  SetTestModel(s.mutable_model());
  return s;
}

using CudaProbeTest = CudaModelTestBase;

// The probe's GEMM on one backend, at the stage's largest GEMM and at an odd shape, in fp32 and
// bf16: the known answer, and not it while the corrupt fault is on.
TEST_F(CudaProbeTest, TheBackendsGemmGivesTheKnownAnswerAndTheFaultReachesIt) {
  for (const std::string precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    const v1::JobSpec spec = jobplan::WithDefaults(Spec(precision, 0));
    auto plan = jobplan::PlanJob(spec);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    const v1::Assignment a = jobplan::BuildAssignment("probe", spec, *plan, 1, {}, 1);
    auto backend = MakeCudaBackend(a);
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    const jobplan::ProbeGemm g = jobplan::ProbeGemmFor(spec, /*holds_head=*/true);
    for (const kernels::cpu::ProbeShape shape : {kernels::cpu::ProbeShape{g.m, g.k, g.n}, kernels::cpu::ProbeShape{7, 300, 13}}) {
      SCOPED_TRACE(shape.ToString());
      const uint64_t seed = kernels::cpu::ProbeSeed(11, 3);
      const kernels::cpu::ProbeInputs in = kernels::cpu::MakeProbeInputs(seed, shape);
      std::vector<float> y;
      ASSERT_TRUE((*backend)->ProbeGemm(shape, in.x, in.w, &y).ok());
      ASSERT_EQ(y.size(), static_cast<size_t>(shape.m * shape.n));
      const uint64_t want = kernels::cpu::KnownAnswerChecksum(seed, shape);
      EXPECT_EQ(kernels::cpu::ProbeChecksum(y.data(), shape, seed), want);
      kernels::cpu::SetGemmCorruption(true);
      std::vector<float> bad;
      const Status st = (*backend)->ProbeGemm(shape, in.x, in.w, &bad);
      kernels::cpu::SetGemmCorruption(false);
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_NE(kernels::cpu::ProbeChecksum(bad.data(), shape, seed), want) << "the fault did not reach the probe";
      int differ = 0;
      for (size_t i = 0; i < y.size(); ++i) differ += y[i] != bad[i];
      EXPECT_EQ(differ, 1) << "one element of the output flips";
    }
    // Inputs of the wrong length are refused by name.
    std::vector<float> y;
    EXPECT_EQ((*backend)->ProbeGemm({2, 2, 2}, {1, 2, 3}, {1, 2, 3, 4}, &y).code(), Code::kInvalidArgument);
  }
}

using RankResult = RankOutcome;

// The job on CUDA ranks, each with the worker's HealthHooks and its rules of `faults`.
std::vector<RankResult> RunJob(const v1::JobSpec& raw, const std::string& faults) {
  const v1::JobSpec spec = jobplan::WithDefaults(raw);
  auto plan = jobplan::PlanJob(spec);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  auto rules = ParseFaultRules(faults);
  EXPECT_TRUE(rules.ok()) << rules.status().ToString();
  if (!plan.ok() || !rules.ok()) return {};
  RankSetup setup;
  setup.hooks = [&](const v1::Assignment& a) {
    return std::make_unique<HealthHooks>(a, RulesFor(*rules, a.dp_rank() * spec.pp() + a.rank()));
  };
  setup.after = [](int, ComputeBackend&) { kernels::cpu::SetGemmCorruption(false); };
  return RunRankThreads(spec, *plan, setup);
}

TEST_F(CudaProbeTest, ACorruptGemmIsSeenByTheProbeFromItsStepAndMovesTheLoss) {
  for (const std::string precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    const v1::JobSpec spec = jobplan::WithDefaults(Spec(precision, 0));
    const std::vector<RankResult> clean = RunJob(spec, ""), faulty = RunJob(spec, "corrupt:1:1");
    ASSERT_EQ(clean.size(), 2u);
    ASSERT_EQ(faulty.size(), 2u);
    auto plan = jobplan::PlanJob(spec);
    ASSERT_TRUE(plan.ok());
    int probes = 0;
    for (int g = 0; g < 2; ++g) {
      ASSERT_TRUE(clean[g].status.ok()) << clean[g].status.ToString();
      ASSERT_TRUE(faulty[g].status.ok()) << faulty[g].status.ToString();
      const jobplan::ProbeGemm pg = jobplan::ProbeGemmFor(spec, jobplan::HoldsHead(*plan, g));
      const kernels::cpu::ProbeShape shape{pg.m, pg.k, pg.n};
      for (size_t step = 0; step < faulty[g].reports.size(); ++step) {
        const uint64_t want =
            kernels::cpu::KnownAnswerChecksum(kernels::cpu::ProbeSeed(spec.model().seed(), static_cast<int>(step)), shape);
        for (const v1::ActionTiming& t : faulty[g].reports[step].actions) {
          if (t.action().op() != v1::PROBE) continue;
          ++probes;
          const bool corrupt = g == 1 && step >= 1;
          if (corrupt) {
            EXPECT_NE(t.probe_checksum(), want) << "rank " << g << " step " << step << ": the fault went unseen";
          } else {
            EXPECT_EQ(t.probe_checksum(), want) << "rank " << g << " step " << step;
          }
        }
        for (const v1::ActionTiming& t : clean[g].reports[step].actions) {
          if (t.action().op() == v1::PROBE) {
            EXPECT_EQ(t.probe_checksum(), want) << "clean rank " << g << " step " << step;
          }
        }
      }
    }
    EXPECT_GT(probes, 0) << "the plan placed no probe";
    // The head's losses: equal up to the fault's step, then not.
    const auto& c = clean[1].reports;
    const auto& f = faulty[1].reports;
    ASSERT_EQ(c.size(), f.size());
    EXPECT_EQ(c[0].summary.loss(), f[0].summary.loss());
    for (size_t step = 1; step < c.size(); ++step) {
      EXPECT_NE(c[step].summary.loss(), f[step].summary.loss()) << "step " << step;
    }
  }
}

// The replay probe on CUDA ranks: every PROBE the plan gave an F to replay reports the F's hash
// and the replay's, equal on a clean run (the same kernels on the same held input); a `flip` in
// that F's first GEMM (a transient: that F only) makes them differ in that step only. With dp 2
// the seeded replays of a stage's replicas agree.
TEST_F(CudaProbeTest, ReplaysMatchOnACleanRunAndCatchAFlipInTheReplayedF) {
  for (const std::string precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    const v1::JobSpec spec = jobplan::WithDefaults(Spec(precision, 0));
    const std::vector<RankResult> clean = RunJob(spec, "");
    ASSERT_EQ(clean.size(), 2u);
    int replays = 0, stage = -1, mb = -1, rank = -1;
    for (int g = 0; g < 2; ++g) {
      ASSERT_TRUE(clean[g].status.ok()) << clean[g].status.ToString();
      for (const StepReport& r : clean[g].reports) {
        for (const v1::ActionTiming& t : r.actions) {
          if (t.action().op() != v1::PROBE || !t.has_replay() || t.replay().seeded()) continue;
          ++replays;
          EXPECT_EQ(t.replay().original_checksum(), t.replay().replay_checksum()) << "rank " << g << " step " << r.summary.step();
          EXPECT_NE(t.replay().original_checksum(), 0u);
          stage = t.replay().stage();
          mb = t.replay().microbatch();
          rank = g;
        }
      }
    }
    ASSERT_GT(replays, 0) << "the plan replays no F";
    // flip:RANK:STEP:MB flips the first GEMM of that F: its hash, not the replay's.
    const std::string flip = "flip:" + std::to_string(rank) + ":2:" + std::to_string(mb);
    const std::vector<RankResult> flipped = RunJob(spec, flip);
    ASSERT_TRUE(flipped[rank].status.ok()) << flipped[rank].status.ToString();
    for (const StepReport& r : flipped[rank].reports) {
      for (const v1::ActionTiming& t : r.actions) {
        if (t.action().op() != v1::PROBE || !t.has_replay() || t.replay().stage() != stage) continue;
        const bool hit = r.summary.step() == 2;
        EXPECT_EQ(t.replay().original_checksum() != t.replay().replay_checksum(), hit)
            << flip << ": step " << r.summary.step();
      }
    }
  }
}

}  // namespace
}  // namespace pipecoord::worker::cuda
