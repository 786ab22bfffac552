// CudaBackend, the executor's view of the CUDA model (gpu-tagged: skips without a GPU):
//
// (3) A 2-stage pipeline run in-process, two backends (two ranks) sharing one device, driven by
//     hand in 1F1B order with B and W split (and BW on the last stage for odd micro-batches),
//     equals the same steps on one backend holding every layer: the same loss, gradients and
//     updated weights, bit for bit (same kernels on the same shapes, gradients accumulated in
//     the same micro-batch order), in fp32 and in bf16.
// (4) 3 AdamW steps on the CUDA backend (fp32) against the CPU backend on the same assignment:
//     each step's loss by |gpu - cpu| / |cpu| <= 1e-4, and then every checkpointed tensor
//     (both moments by max|gpu - cpu| / max|cpu| <= 1e-4, weights <= 1e-3; 0 on the host
//     double). The weights get the looser bound because AdamW divides each element's first
//     moment by the root of its second, which amplifies the gradients' fp32 rounding where a
//     gradient is small: on an H200 (2026-11-25) layers.1.wk's weights differed by 1.6e-4 of
//     max|w| after 3 steps while both moments agreed within 1e-4. 1e-3 of max|w| (2.2e-4 here)
//     still fails for one element moved the wrong way by lr (1e-3), the error a wrong update or
//     a gradient of the wrong sign would make; the message names the element.
// Also: a checkpoint taken from one backend and restored into a fresh one continues exactly,
// and the memory counters follow the caching pool.
#include "worker/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "worker/cuda/cuda_test_util.h"
#include "worker/daemon/backend_factory.h"

namespace pipecoord::worker::cuda {
namespace {

using kernels::cuda::CompareNormwise;

// Weights after AdamW steps (see (4) above); kFp32Tolerance is 0 on the host stand-in.
constexpr double kAdamWeightTolerance = kFp32Tolerance == 0 ? 0 : 1e-3;

enum class Kind { kF, kB, kW, kBW };
struct Op {
  Kind kind;
  int mb;
};

// A stage's host copy of every checkpointed tensor, by name.
std::map<std::string, std::vector<float>> Snapshot(ComputeBackend& backend) {
  std::map<std::string, std::vector<float>> out;
  for (const StateTensor& t : backend.CheckpointState()) out[t.name].assign(t.data.begin(), t.data.end());
  return out;
}

// Every gradient of every stage the backend holds, by "stage/name".
Result<std::map<std::string, std::vector<float>>> Gradients(CudaBackend& backend, const std::vector<int>& stages) {
  std::map<std::string, std::vector<float>> out;
  for (int s : stages) {
    CudaStageModel* m = backend.stage(s);
    if (m == nullptr) return NotFound("stage " + std::to_string(s));
    for (DeviceParameter& p : m->parameters()) {
      auto g = backend.device().DownloadFloats(p.grad);
      if (!g.ok()) return g.status();
      out[p.name] = std::move(g).value();
    }
  }
  return out;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class CudaBackendTest : public CudaModelTest {
 protected:
  static constexpr int kMicrobatches = 4;

  std::unique_ptr<CudaBackend> Make(const v1::Assignment& a, Precision precision) {
    CudaBackendOptions options;
    options.shared_device = device_;
    v1::Assignment with = a;  // the backend copies what it needs
    with.mutable_spec()->set_precision(PrecisionName(precision));
    auto b = MakeCudaBackend(with, options);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? std::move(b).value() : nullptr;
  }

  // (3) for one precision.
  void PipelineEqualsSingleStage(Precision precision) {
    const model::ModelConfig config = TestConfig();
    auto split = model::SplitModel(config, {1, 1});
    ASSERT_TRUE(split.ok());
    auto whole = Make(TestAssignment({model::WholeModel(config)}, 1, 0, kMicrobatches, "cuda"), precision);
    auto rank0 = Make(TestAssignment({(*split)[0]}, 2, 0, kMicrobatches, "cuda"), precision);
    auto rank1 = Make(TestAssignment({(*split)[1]}, 2, 1, kMicrobatches, "cuda"), precision);
    ASSERT_TRUE(whole && rank0 && rank1);
    EXPECT_EQ(rank0->BoundarySpec(), whole->BoundarySpec());

    // 1F1B with p = 2: rank 0 warms up with one F; W follows each B. Rank 1 uses BW for odd mbs.
    const std::vector<std::vector<Op>> lists = {
        {{Kind::kF, 0}, {Kind::kF, 1}, {Kind::kB, 0}, {Kind::kW, 0}, {Kind::kF, 2}, {Kind::kB, 1},
         {Kind::kW, 1}, {Kind::kF, 3}, {Kind::kB, 2}, {Kind::kW, 2}, {Kind::kB, 3}, {Kind::kW, 3}},
        {{Kind::kF, 0}, {Kind::kB, 0}, {Kind::kW, 0}, {Kind::kF, 1}, {Kind::kBW, 1}, {Kind::kF, 2},
         {Kind::kB, 2}, {Kind::kW, 2}, {Kind::kF, 3}, {Kind::kBW, 3}}};
    CudaBackend* ranks[2] = {rank0.get(), rank1.get()};

    for (int step = 0; step < 2; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      // The pipeline: run whichever rank's next action has its input.
      std::map<int, kernels::Tensor> act, grad;  // by mb: rank 0 -> 1, rank 1 -> 0
      size_t next[2] = {0, 0};
      while (next[0] < lists[0].size() || next[1] < lists[1].size()) {
        bool progressed = false;
        for (int r = 0; r < 2; ++r) {
          if (next[r] == lists[r].size()) continue;
          const Op op = lists[r][next[r]];
          CudaBackend* b = ranks[r];
          if (op.kind == Kind::kF) {
            if (r == 1 && !act.count(op.mb)) continue;
            kernels::Tensor in;
            if (r == 1) {
              in = std::move(act[op.mb]);
              act.erase(op.mb);
            }
            auto out = b->Forward(r, op.mb, step, std::move(in));
            ASSERT_TRUE(out.ok()) << out.status().ToString();
            if (r == 0) act[op.mb] = std::move(out).value();
          } else if (op.kind == Kind::kW) {
            ASSERT_TRUE(b->BackwardWeight(r, op.mb).ok());
          } else {
            if (r == 0 && !grad.count(op.mb)) continue;
            kernels::Tensor g;
            if (r == 0) {
              g = std::move(grad[op.mb]);
              grad.erase(op.mb);
            }
            auto out = op.kind == Kind::kB ? b->BackwardInput(r, op.mb, std::move(g))
                                           : b->BackwardFull(r, op.mb, std::move(g));
            ASSERT_TRUE(out.ok()) << out.status().ToString();
            if (r == 1) grad[op.mb] = std::move(out).value();
          }
          ++next[r];
          progressed = true;
        }
        ASSERT_TRUE(progressed) << "the hand-made lists deadlock";
      }
      // The single stage: F, B, W per micro-batch, in order.
      for (int mb = 0; mb < kMicrobatches; ++mb) {
        ASSERT_TRUE(whole->Forward(0, mb, step, kernels::Tensor()).ok());
        ASSERT_TRUE(whole->BackwardInput(0, mb, kernels::Tensor()).ok());
        ASSERT_TRUE(whole->BackwardWeight(0, mb).ok());
      }
      double pipeline_loss = 0, whole_loss = 0;
      EXPECT_FALSE(rank0->StepLoss(&pipeline_loss));  // no head on rank 0
      ASSERT_TRUE(rank1->StepLoss(&pipeline_loss));
      ASSERT_TRUE(whole->StepLoss(&whole_loss));
      EXPECT_EQ(pipeline_loss, whole_loss);
      EXPECT_GT(whole_loss, 1.0);  // about log(vocab) for an untrained model

      auto g_whole = Gradients(*whole, {0});
      auto g0 = Gradients(*rank0, {0});
      auto g1 = Gradients(*rank1, {1});
      ASSERT_TRUE(g_whole.ok() && g0.ok() && g1.ok());
      EXPECT_EQ(g0->size() + g1->size(), g_whole->size());
      for (const auto& part : {*g0, *g1}) {
        for (const auto& [name, values] : part) {
          ASSERT_TRUE(g_whole->count(name)) << name;
          EXPECT_TRUE(SameBits(values, g_whole->at(name))) << name << ": gradients differ";
        }
      }
      ASSERT_TRUE(whole->OptimizerStep(step).ok());
      ASSERT_TRUE(rank0->OptimizerStep(step).ok());
      ASSERT_TRUE(rank1->OptimizerStep(step).ok());
    }
    // The updated weights and moments (the checkpoint names carry the stage: strip it).
    auto strip = [](std::map<std::string, std::vector<float>> m) {
      std::map<std::string, std::vector<float>> out;
      for (auto& [k, v] : m) out[k.substr(k.find('/') + 1)] = std::move(v);
      return out;
    };
    const auto s_whole = strip(Snapshot(*whole));
    const auto s0 = strip(Snapshot(*rank0));
    const auto s1 = strip(Snapshot(*rank1));
    EXPECT_EQ(s0.size() + s1.size(), s_whole.size());
    for (const auto& part : {s0, s1}) {
      for (const auto& [name, values] : part) {
        ASSERT_TRUE(s_whole.count(name)) << name;
        EXPECT_TRUE(SameBits(values, s_whole.at(name))) << name << ": differs after 2 steps";
      }
    }
  }
};

TEST_F(CudaBackendTest, Fp32PipelineOf2StagesEqualsOneStage) { PipelineEqualsSingleStage(Precision::kFp32); }
TEST_F(CudaBackendTest, Bf16PipelineOf2StagesEqualsOneStage) { PipelineEqualsSingleStage(Precision::kBf16); }

TEST_F(CudaBackendTest, ThreeAdamWStepsMatchTheCpuBackend) {
  const model::ModelConfig config = TestConfig();
  const v1::Assignment cpu_a = TestAssignment({model::WholeModel(config)}, 1, 0, 2, "cpu");
  const v1::Assignment gpu_a = TestAssignment({model::WholeModel(config)}, 1, 0, 2, "cuda");
  auto cpu = MakeBackend(cpu_a);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  auto gpu = Make(gpu_a, Precision::kFp32);
  ASSERT_TRUE(gpu);
  const auto initial = Snapshot(*gpu);
  for (int step = 0; step < 3; ++step) {
    for (ComputeBackend* b : {cpu->get(), static_cast<ComputeBackend*>(gpu.get())}) {
      for (int mb = 0; mb < 2; ++mb) {
        auto out = b->Forward(0, mb, step, kernels::Tensor());
        ASSERT_TRUE(out.ok()) << out.status().ToString();
        auto dx = b->BackwardFull(0, mb, kernels::Tensor());
        ASSERT_TRUE(dx.ok()) << dx.status().ToString();
      }
      ASSERT_TRUE(b->OptimizerStep(step).ok());
    }
    double cpu_loss = 0, gpu_loss = 0;
    ASSERT_TRUE((*cpu)->StepLoss(&cpu_loss));
    ASSERT_TRUE(gpu->StepLoss(&gpu_loss));
    EXPECT_LE(RelativeError(gpu_loss, cpu_loss), kFp32Tolerance) << "step " << step << ": gpu " << gpu_loss << ", cpu " << cpu_loss;
  }
  EXPECT_EQ(gpu->optimizer_steps(), 3);
  const auto want = Snapshot(**cpu);
  const auto got = Snapshot(*gpu);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, values] : want) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(got.count(name));
    const kernels::cuda::NormwiseError e = CompareNormwise(got.at(name), values);
    EXPECT_LE(e.error, name.ends_with("/value") ? kAdamWeightTolerance : kFp32Tolerance)
        << e.Describe();
    if (name.ends_with("/value") && name.find("norm") == std::string::npos) {
      // The weights moved (by about lr per step): the comparison is not of initial values.
      const kernels::cuda::NormwiseError moved = CompareNormwise(got.at(name), initial.at(name));
      EXPECT_GT(moved.error * moved.cpu_max, 1e-3) << "weights did not move: " << moved.Describe();
    }
  }
}

// spec.data: the CUDA backend reads the job's dataset as the CPU backend does (the same
// sequences for the same step), so their losses agree, and differ from the synthetic stream's.
TEST_F(CudaBackendTest, TrainsOnADatasetLikeTheCpuBackend) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string prefix = std::string(tmp ? tmp : "/tmp") + "/cuda_backend_data";
  std::string bin;
  for (int i = 0; i < 4000; ++i) {
    const int id = (i * i + 7 * i) % 96;  // below TestConfig's vocabulary
    bin.push_back(static_cast<char>(id));
    bin.push_back(0);
  }
  std::ofstream(prefix + ".bin", std::ios::binary) << bin;
  std::ofstream(prefix + ".json") << "{\"dtype\": \"uint16\", \"vocab_size\": 96}";
  const model::ModelConfig config = TestConfig();
  std::vector<double> losses[3];  // cpu on data, cuda on data, cuda synthetic
  for (int run = 0; run < 3; ++run) {
    v1::Assignment a = TestAssignment({model::WholeModel(config)}, 1, 0, 2, run == 0 ? "cpu" : "cuda");
    if (run < 2) a.mutable_spec()->mutable_data()->set_path(prefix);
    std::unique_ptr<ComputeBackend> b;
    if (run == 0) {
      auto cpu = MakeBackend(a);
      ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
      b = std::move(cpu).value();
    } else {
      b = Make(a, Precision::kFp32);
      ASSERT_TRUE(b);
    }
    for (int step = 0; step < 2; ++step) {
      for (int mb = 0; mb < 2; ++mb) {
        ASSERT_TRUE(b->Forward(0, mb, step, kernels::Tensor()).ok());
        ASSERT_TRUE(b->BackwardFull(0, mb, kernels::Tensor()).ok());
      }
      ASSERT_TRUE(b->OptimizerStep(step).ok());
      double loss = 0;
      ASSERT_TRUE(b->StepLoss(&loss));
      losses[run].push_back(loss);
    }
  }
  for (int step = 0; step < 2; ++step) {
    EXPECT_LE(RelativeError(losses[1][step], losses[0][step]), kFp32Tolerance) << "step " << step;
    EXPECT_NE(losses[1][step], losses[2][step]) << "step " << step << ": the dataset was not read";
  }
}

TEST_F(CudaBackendTest, ACheckpointRestoredIntoAFreshBackendContinuesExactly) {
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(PrecisionName(precision));
    const v1::Assignment a = TestAssignment({model::WholeModel(TestConfig())}, 1, 0, 2, "cuda");
    auto run_step = [&](CudaBackend& b, int step, double* loss) {
      for (int mb = 0; mb < 2; ++mb) {
        ASSERT_TRUE(b.Forward(0, mb, step, kernels::Tensor()).ok());
        ASSERT_TRUE(b.BackwardFull(0, mb, kernels::Tensor()).ok());
      }
      ASSERT_TRUE(b.OptimizerStep(step).ok());
      ASSERT_TRUE(b.StepLoss(loss));
    };
    auto first = Make(a, precision);
    ASSERT_TRUE(first);
    double loss = 0;
    run_step(*first, 0, &loss);
    const auto saved = Snapshot(*first);
    const int64_t steps = first->optimizer_steps();

    auto second = Make(a, precision);
    ASSERT_TRUE(second);
    // checkpointing.cc's order: read into the views, then set the step count.
    for (const StateTensor& t : second->CheckpointState()) {
      ASSERT_TRUE(saved.count(t.name)) << t.name;
      ASSERT_EQ(saved.at(t.name).size(), t.data.size());
      std::copy(saved.at(t.name).begin(), saved.at(t.name).end(), t.data.begin());
    }
    second->set_optimizer_steps(steps);

    double loss_first = 0, loss_second = 0;
    run_step(*first, 1, &loss_first);
    run_step(*second, 1, &loss_second);
    EXPECT_EQ(loss_second, loss_first);
    const auto a_state = Snapshot(*first);
    const auto b_state = Snapshot(*second);
    for (const auto& [name, values] : a_state) {
      EXPECT_TRUE(SameBits(values, b_state.at(name))) << name;
    }
  }
}

TEST_F(CudaBackendTest, MemoryCountersFollowTheCachingPool) {
  auto b = Make(TestAssignment({model::WholeModel(TestConfig())}, 1, 0, 2, "cuda"), Precision::kFp32);
  ASSERT_TRUE(b);
  const uint64_t weights = b->memory_in_use_bytes();
  EXPECT_GT(weights, 0u);
  b->ResetPeak();
  EXPECT_EQ(b->memory_peak_bytes(), weights);
  ASSERT_TRUE(b->Forward(0, 0, 0, kernels::Tensor()).ok());
  const uint64_t with_activations = b->memory_in_use_bytes();
  EXPECT_GT(with_activations, weights);  // what F keeps for the backward
  ASSERT_TRUE(b->BackwardFull(0, 0, kernels::Tensor()).ok());
  EXPECT_EQ(b->memory_in_use_bytes(), weights);  // W freed every saved tensor
  EXPECT_GE(b->memory_peak_bytes(), with_activations);
  EXPECT_GE(b->memory_reserved_bytes(), b->memory_peak_bytes());
  b->ResetPeak();
  EXPECT_EQ(b->memory_peak_bytes(), weights);
}

}  // namespace
}  // namespace pipecoord::worker::cuda
