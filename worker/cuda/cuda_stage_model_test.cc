// CudaStageModel against the CPU StageModel (worker/model/stage_model.h), the reference.
//
// Metrics (cuda_test_util.h): the loss by |gpu - cpu| / |cpu|; every tensor (each parameter's
// gradient, boundary activations and gradients) by max|gpu - cpu| / max|cpu|. Thresholds: 1e-4
// in fp32 (0 on the host double: kFp32Tolerance), 2e-2 in bf16 (where the CPU model gets the
// bf16-rounded weights the GPU kernels read, so only the arithmetic differs). Gradient buffers start at zero, so a gradient W never wrote
// stays zero and fails against the CPU's non-zero one (each test checks that they are non-zero).
#include "worker/cuda/cuda_stage_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "worker/cuda/cuda_test_util.h"
#include "worker/model/stage_model.h"
#include "worker/model/synthetic_data.h"

namespace pipecoord::worker::cuda {
namespace {

using kernels::cuda::CompareNormwise;

class CudaStageModelTest : public CudaModelTest {
 protected:
  model::BatchShape Batch(int microbatches) const {
    model::BatchShape b;
    b.micro_batch_size = kTestMicroBatchSize;
    b.microbatches = microbatches;
    return b;
  }
  model::TokenBatch Data(int mb) const {
    const model::ModelConfig c = TestConfig();
    return model::SyntheticData(5, c.vocab, c.seq_len, kTestMicroBatchSize).Batch(0, mb);
  }

  // One micro-batch, F then BW, on a stage holding every layer of `config` in `precision`, against
  // the CPU model: the loss and every parameter's gradient. With `after_a_step` (fp32) both then
  // take an AdamW step and run the next micro-batch, compared the same way: weights that moved
  // (biases no longer zero) feed the second forward.
  void CompareOneMicroBatch(Precision precision, double tolerance,
                            const model::ModelConfig& config = TestConfig(), bool after_a_step = false) {
    const model::StageShard whole = model::WholeModel(config);
    const model::BatchShape batch = Batch(2);  // dloss = 1/2: the scaling is part of the check
    auto cpu = model::StageModel::Create(config, whole, batch);
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    auto gpu = CudaStageModel::Create(config, whole, batch, precision, device_.get());
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    if (precision == Precision::kBf16) {
      for (const model::ParameterRef& p : (*cpu)->Parameters()) RoundToBf16(p.value);
    }
    for (int mb = 0; mb < (after_a_step ? 2 : 1); ++mb) {
      SCOPED_TRACE("micro-batch " + std::to_string(mb));
      if (mb > 0) {
        kernels::cpu::AdamWOptions step;
        step.lr = 1e-2;
        ASSERT_TRUE((*cpu)->OptimizerStep(step).ok());
        const Status st = (*gpu)->OptimizerStep(step);
        ASSERT_TRUE(st.ok()) << st.ToString();
        (*cpu)->ZeroGrad();
        ASSERT_TRUE((*gpu)->ZeroGrad().ok());
      }
      const model::TokenBatch data = Data(mb);
      model::StageInput cin;
      cin.tokens = kernels::ToHostBuffer(data.inputs);
      cin.targets = kernels::ToHostBuffer(data.targets);
      auto cout = (*cpu)->Forward(mb, std::move(cin));
      ASSERT_TRUE(cout.ok()) << cout.status().ToString();
      ASSERT_TRUE(cout->loss.has_value());
      ASSERT_TRUE((*cpu)->BackwardFull(mb, {}).ok());

      CudaStageInput gin;
      gin.tokens = data.inputs;
      gin.targets = data.targets;
      auto gout = (*gpu)->Forward(mb, std::move(gin));
      ASSERT_TRUE(gout.ok()) << gout.status().ToString();
      EXPECT_TRUE(gout->empty());
      auto dx = (*gpu)->BackwardFull(mb, kernels::Tensor());
      ASSERT_TRUE(dx.ok()) << dx.status().ToString();
      EXPECT_TRUE(dx->empty());
      EXPECT_EQ((*gpu)->MicroBatchesInFlight(), 0);
      auto loss = (*gpu)->TakeLossSum();
      ASSERT_TRUE(loss.ok()) << loss.status().ToString();
      EXPECT_LE(RelativeError(*loss, *cout->loss), tolerance)
          << "loss gpu " << *loss << ", cpu " << *cout->loss;

      const std::vector<model::ParameterRef> cpu_params = (*cpu)->Parameters();
      std::vector<DeviceParameter>& gpu_params = (*gpu)->parameters();
      ASSERT_EQ(gpu_params.size(), cpu_params.size());
      for (size_t i = 0; i < cpu_params.size(); ++i) {
        SCOPED_TRACE(gpu_params[i].name);
        EXPECT_EQ(gpu_params[i].name, cpu_params[i].name);
        EXPECT_EQ(gpu_params[i].shape, std::vector<int64_t>(cpu_params[i].shape.begin(), cpu_params[i].shape.end()));
        auto grad = device_->DownloadFloats(gpu_params[i].grad);
        ASSERT_TRUE(grad.ok()) << grad.status().ToString();
        const std::vector<float> want(cpu_params[i].grad.begin(), cpu_params[i].grad.end());
        const kernels::cuda::NormwiseError e = CompareNormwise(*grad, want);
        EXPECT_GT(e.cpu_max, 0.0) << "the CPU gradient is all zero: the check would be empty";
        EXPECT_LE(e.error, tolerance) << e.Describe();
        if (mb > 0 && cpu_params[i].name.find(".bias") != std::string::npos) {  // the step moved it
          EXPECT_TRUE(std::any_of(cpu_params[i].value.begin(), cpu_params[i].value.end(),
                                  [](float v) { return v != 0.0f; }));
        }
      }
    }
  }
};

TEST_F(CudaStageModelTest, Fp32LossAndGradientsMatchTheCpuModel) {
  CompareOneMicroBatch(Precision::kFp32, kFp32Tolerance);
}

TEST_F(CudaStageModelTest, Bf16LossAndGradientsMatchTheCpuModel) {
  CompareOneMicroBatch(Precision::kBf16, 2e-2);
}

// Llama 3's and Mistral's attention shapes: grouped-query attention (2 key/value heads for 4
// query heads: wk and wv [kv_heads x head_dim, h], k and v that wide, dk and dv summed over each
// group) and head_dim given explicitly (24, so q and o are 96 wide for h = 64, as Gemma's and
// Qwen3's are not h either). The same comparison: a wrong width, a head read from the wrong
// key/value head or a group not summed fails it.
model::ModelConfig GroupedQueryConfig() {
  model::ModelConfig c = TestConfig();
  c.kv_heads = 2;
  c.head_dim = 24;
  return c;
}

TEST_F(CudaStageModelTest, Fp32GroupedQueryAndHeadDimMatchTheCpuModel) {
  CompareOneMicroBatch(Precision::kFp32, kFp32Tolerance, GroupedQueryConfig());
}

TEST_F(CudaStageModelTest, Bf16GroupedQueryAndHeadDimMatchTheCpuModel) {
  CompareOneMicroBatch(Precision::kBf16, 2e-2, GroupedQueryConfig());
}

// Qwen2's q, k, v biases (with its grouped-query attention): three more parameters per block,
// added before RoPE, their gradients the token sums of dq, dk, dv. The biases start at zero, so
// the first micro-batch's loss does not see them (their gradients must still match, non-zero);
// in fp32 a step later they are not, and the second micro-batch's loss and gradients must match.
model::ModelConfig Qwen2Config() {
  model::ModelConfig c = TestConfig();
  c.kv_heads = 2;
  c.qkv_bias = true;
  return c;
}

TEST_F(CudaStageModelTest, Fp32QkvBiasesMatchTheCpuModel) {
  CompareOneMicroBatch(Precision::kFp32, kFp32Tolerance, Qwen2Config(), /*after_a_step=*/true);
}

TEST_F(CudaStageModelTest, Bf16QkvBiasesMatchTheCpuModel) {
  CompareOneMicroBatch(Precision::kBf16, 2e-2, Qwen2Config());
}

// Llama 3.2's tied embeddings on a stage holding both ends: one tensor (no "output.weight": the
// parameter lists must match the CPU model's), started at the head's scale, its gradient the sum
// of the LM head's and the lookup's; after a step the second micro-batch reads the moved matrix
// through both paths.
model::ModelConfig TiedConfig() {
  model::ModelConfig c = TestConfig();
  c.tied_embeddings = true;
  return c;
}

TEST_F(CudaStageModelTest, Fp32TiedEmbeddingsMatchTheCpuModel) {
  CompareOneMicroBatch(Precision::kFp32, kFp32Tolerance, TiedConfig(), /*after_a_step=*/true);
}

TEST_F(CudaStageModelTest, Bf16TiedEmbeddingsMatchTheCpuModel) {
  CompareOneMicroBatch(Precision::kBf16, 2e-2, TiedConfig());
}

// Mistral's sliding window (12 of the 40 positions: whole key tiles fall before some rows'
// windows) with its grouped-query attention.
model::ModelConfig MistralConfig() {
  model::ModelConfig c = TestConfig();
  c.kv_heads = 2;
  c.sliding_window = 12;
  return c;
}

TEST_F(CudaStageModelTest, Fp32MistralSlidingWindowMatchesTheCpuModel) {
  CompareOneMicroBatch(Precision::kFp32, kFp32Tolerance, MistralConfig(), /*after_a_step=*/true);
}

TEST_F(CudaStageModelTest, Bf16MistralSlidingWindowMatchesTheCpuModel) {
  CompareOneMicroBatch(Precision::kBf16, 2e-2, MistralConfig());
}

// Llama 3.2 as it ships, in small: grouped-query attention, tied embeddings, RoPE base 500000
// with Llama 3's frequency scaling (factor 32 over an original context of 8, so the 40 positions
// here span its low, middle and high frequency bands).
TEST_F(CudaStageModelTest, Fp32Llama32MatchesTheCpuModel) {
  model::ModelConfig c = TestConfig();
  c.kv_heads = 2;
  c.tied_embeddings = true;
  c.rope_theta = 500000;
  c.rope_scaling.factor = 32;
  c.rope_scaling.low_freq_factor = 1;
  c.rope_scaling.high_freq_factor = 4;
  c.rope_scaling.original_max_positions = 8;
  CompareOneMicroBatch(Precision::kFp32, kFp32Tolerance, c, /*after_a_step=*/true);
}

// The tensors that cross a stage boundary, fp32: stage 0's output activations and stage 1's
// input gradient against the CPU stages', then stage 0's gradients from the GPU's own dx.
TEST_F(CudaStageModelTest, BoundaryTensorsMatchTheCpuStages) {
  const model::ModelConfig config = TestConfig();
  auto shards = model::SplitModel(config, {1, 1});
  ASSERT_TRUE(shards.ok()) << shards.status().ToString();
  const model::BatchShape batch = Batch(1);
  std::vector<std::unique_ptr<model::StageModel>> cpu;
  std::vector<std::unique_ptr<CudaStageModel>> gpu;
  for (const model::StageShard& s : *shards) {
    auto c = model::StageModel::Create(config, s, batch);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cpu.push_back(std::move(c).value());
    auto g = CudaStageModel::Create(config, s, batch, Precision::kFp32, device_.get());
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    gpu.push_back(std::move(g).value());
  }
  const model::TokenBatch data = Data(0);

  model::StageInput c0;
  c0.tokens = kernels::ToHostBuffer(data.inputs);
  auto cact = cpu[0]->Forward(0, std::move(c0));
  ASSERT_TRUE(cact.ok());
  CudaStageInput g0;
  g0.tokens = data.inputs;
  auto gact = gpu[0]->Forward(0, std::move(g0));
  ASSERT_TRUE(gact.ok()) << gact.status().ToString();
  EXPECT_EQ(gact->spec(), gpu[0]->ActivationSpec());
  auto act = ReadFloats(*device_, *gact);
  ASSERT_TRUE(act.ok()) << act.status().ToString();
  const kernels::cuda::NormwiseError eact = CompareNormwise(*act, cact->activations);
  EXPECT_LE(eact.error, kFp32Tolerance) << "stage 0 output: " << eact.Describe();

  model::StageInput c1;
  c1.activations = cact->activations;
  c1.targets = kernels::ToHostBuffer(data.targets);
  ASSERT_TRUE(cpu[1]->Forward(0, std::move(c1)).ok());
  auto cdx = cpu[1]->BackwardInput(0, {});
  ASSERT_TRUE(cdx.ok());
  CudaStageInput g1;
  g1.activations = *gact;
  g1.targets = data.targets;
  ASSERT_TRUE(gpu[1]->Forward(0, std::move(g1)).ok());
  auto gdx = gpu[1]->BackwardInput(0, kernels::Tensor());
  ASSERT_TRUE(gdx.ok()) << gdx.status().ToString();
  EXPECT_EQ(gdx->spec(), gpu[1]->ActivationSpec());
  auto dx = ReadFloats(*device_, *gdx);
  ASSERT_TRUE(dx.ok()) << dx.status().ToString();
  const kernels::cuda::NormwiseError edx = CompareNormwise(*dx, *cdx);
  EXPECT_LE(edx.error, kFp32Tolerance) << "stage 1 input gradient: " << edx.Describe();

  // W after B, in zero-bubble order: stage 0's B runs before stage 1's W.
  ASSERT_TRUE(cpu[0]->BackwardFull(0, *cdx).ok());
  auto g0dx = gpu[0]->BackwardFull(0, *gdx);
  ASSERT_TRUE(g0dx.ok()) << g0dx.status().ToString();
  EXPECT_TRUE(g0dx->empty());
  ASSERT_TRUE(cpu[1]->BackwardWeight(0).ok());
  ASSERT_TRUE(gpu[1]->BackwardWeight(0).ok());
  for (size_t s = 0; s < 2; ++s) {
    const std::vector<model::ParameterRef> cp = cpu[s]->Parameters();
    ASSERT_EQ(gpu[s]->parameters().size(), cp.size());
    for (size_t i = 0; i < cp.size(); ++i) {
      SCOPED_TRACE(cp[i].name);
      auto grad = device_->DownloadFloats(gpu[s]->parameters()[i].grad);
      ASSERT_TRUE(grad.ok()) << grad.status().ToString();
      const kernels::cuda::NormwiseError e =
          CompareNormwise(*grad, std::vector<float>(cp[i].grad.begin(), cp[i].grad.end()));
      EXPECT_GT(e.cpu_max, 0.0);
      EXPECT_LE(e.error, kFp32Tolerance) << e.Describe();
    }
  }
}

// The order rules and input checks of the CPU model, and a host tensor refused as input.
TEST_F(CudaStageModelTest, RefusesCallsOutOfOrderAndForeignInputs) {
  const model::ModelConfig config = TestConfig();
  auto shards = model::SplitModel(config, {1, 1});
  ASSERT_TRUE(shards.ok());
  auto head = CudaStageModel::Create(config, (*shards)[1], Batch(1), Precision::kFp32, device_.get());
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ((*head)->BackwardInput(0, kernels::Tensor()).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ((*head)->BackwardWeight(0).code(), Code::kFailedPrecondition);

  const model::TokenBatch data = Data(0);
  const kernels::TensorSpec spec = (*head)->ActivationSpec();
  CudaStageInput host_input;
  host_input.activations = kernels::Tensor::FromVector(std::vector<float>(spec.numel(), 0.5f), spec.shape);
  host_input.targets = data.targets;
  auto refused = (*head)->Forward(0, std::move(host_input));
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument) << refused.status().ToString();

  auto x = device_->Zeros(spec);
  ASSERT_TRUE(x.ok());
  CudaStageInput in;
  in.activations = *x;
  in.targets = data.targets;
  in.targets[3] = config.vocab;  // out of range
  auto bad = (*head)->Forward(0, in);
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument) << bad.status().ToString();
  in.targets = data.targets;
  ASSERT_TRUE((*head)->Forward(0, in).ok());
  EXPECT_EQ((*head)->Forward(0, in).status().code(), Code::kFailedPrecondition);  // in flight
  EXPECT_EQ((*head)->BackwardWeight(0).code(), Code::kFailedPrecondition);       // B first
  EXPECT_EQ((*head)->OptimizerStep({}).code(), Code::kFailedPrecondition);        // in flight
  ASSERT_TRUE((*head)->BackwardInput(0, kernels::Tensor()).ok());
  ASSERT_TRUE((*head)->BackwardWeight(0).ok());
  EXPECT_TRUE((*head)->OptimizerStep({}).ok());
  EXPECT_EQ((*head)->optimizer_steps(), 1);
}

}  // namespace
}  // namespace pipecoord::worker::cuda
