// What the worker/cuda GPU tests share: the model they train, the device fixture (skipping by
// kernels/cuda/gpu_test.h's rule), device tensors read back as floats, and the comparisons.
//
// Built two ways: against the real GPU code (gpu-tagged tests, which skip without a GPU), and
// with PIPECOORD_CUDA_HOST_EMULATION against host_kernels_for_tests.cc, a CPU double of the GPU
// (those tests run everywhere; see that file for what they prove and what they cannot).
//
// Metric for tensors (kernels/cuda/normwise_error.h): max|gpu - cpu| / max|cpu| over the
// tensor, because every gradient element is a long sum whose rounding error scales with the
// terms summed, not with a (possibly cancelled) result. For the loss: |gpu - cpu| / |cpu|.
#ifndef PIPECOORD_WORKER_CUDA_CUDA_TEST_UTIL_H_
#define PIPECOORD_WORKER_CUDA_CUDA_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/cuda/bf16.h"
#ifndef PIPECOORD_CUDA_HOST_EMULATION
#include "kernels/cuda/gpu_test.h"
#endif
#include "kernels/cuda/normwise_error.h"
#include "kernels/tensor.h"
#include "proto/worker.pb.h"
#include "worker/cuda/cuda_device.h"
#include "worker/model/model_config.h"
#include "worker/model/stage_shard.h"

namespace pipecoord::worker::cuda {

// Small enough for the CPU reference, with every path taken: 2 blocks, 4 heads of 16, SwiGLU
// width 192 (the default rule), a sequence that is not a multiple of flash attention's tiles.
inline model::ModelConfig TestConfig() {
  model::ModelConfig c;
  c.layers = 2;
  c.hidden = 64;
  c.ffn_hidden = 0;
  c.heads = 4;
  c.vocab = 96;
  c.seq_len = 40;
  c.seed = 11;
  return c;
}
inline constexpr int kTestMicroBatchSize = 2;

// The fp32 threshold on both metrics: 1e-4 on a GPU (cuBLASLt sums in fp32, the CPU in double);
// 0 on the host double, whose f32 launchers are the CPU twins themselves, so any difference
// is a wiring error of the CUDA model.
#ifdef PIPECOORD_CUDA_HOST_EMULATION
inline constexpr double kFp32Tolerance = 0;
#else
inline constexpr double kFp32Tolerance = 1e-4;
#endif

// TestConfig() as a job's model.
inline void SetTestModel(v1::ModelSpec* m) {
  const model::ModelConfig c = TestConfig();
  m->set_layers(c.layers);
  m->set_hidden(c.hidden);
  m->set_ffn_hidden(c.ffn_hidden);
  m->set_heads(c.heads);
  m->set_vocab(c.vocab);
  m->set_seq_len(c.seq_len);
  m->set_seed(c.seed);
}

// The assignment of one rank holding `shards` of TestConfig() (pp ranks, m micro-batches).
inline v1::Assignment TestAssignment(const std::vector<model::StageShard>& shards, int pp, int rank,
                                     int microbatches, const std::string& device) {
  v1::Assignment a;
  a.set_job_id("cuda-test");
  a.set_rank(rank);
  v1::JobSpec* s = a.mutable_spec();
  s->set_device(device);
  s->set_pp(pp);
  s->set_microbatches(microbatches);
  s->set_micro_batch_size(kTestMicroBatchSize);
  s->set_steps(3);
  s->set_learning_rate(1e-3);
  s->set_data_seed(5);
  SetTestModel(s->mutable_model());
  for (const model::StageShard& sh : shards) {
    v1::StageShard* p = a.add_shards();
    p->set_stage(sh.stage);
    p->set_first_layer(sh.first_layer);
    p->set_num_layers(sh.num_layers);
    p->set_has_embedding(sh.has_embedding);
    p->set_has_head(sh.has_head);
  }
  return a;
}

#ifdef PIPECOORD_CUDA_HOST_EMULATION
using CudaModelTestBase = ::testing::Test;  // the host double: nothing to skip
#else
using CudaModelTestBase = kernels::cuda::GpuTest;  // skips where there is no GPU to use
#endif

// The base above with a CudaDevice on device 0.
class CudaModelTest : public CudaModelTestBase {
 protected:
  void SetUp() override {
    CudaModelTestBase::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto device = CudaDevice::Open(0);
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    device_ = std::move(device).value();
  }
  void TearDown() override {
    if (device_ != nullptr) {
      EXPECT_TRUE(device_->Synchronize().ok());
    }
    CudaModelTestBase::TearDown();
  }

  std::shared_ptr<CudaDevice> device_;
};

// An f32 or bf16 device tensor's values as floats (waits for the stream).
inline Result<std::vector<float>> ReadFloats(CudaDevice& device, const kernels::Tensor& t) {
  if (t.dtype() == kernels::DType::kF32) return device.DownloadFloats(t);
  if (t.dtype() != kernels::DType::kBF16) {
    return InvalidArgument("ReadFloats: f32 or bf16 expected, got " + kernels::ToString(t.spec()));
  }
  std::vector<uint16_t> bits(static_cast<size_t>(t.numel()));
  PIPECOORD_RETURN_IF_ERROR(device.Download(t, bits.data()));
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = kernels::cuda::Bf16BitsToFloat(bits[i]);
  return out;
}

inline double RelativeError(double gpu, double cpu) {
  return std::fabs(gpu - cpu) / std::fabs(cpu);
}

// Every value as its nearest bf16 (what the bf16 model's kernels read).
inline void RoundToBf16(std::span<float> values) {
  for (float& v : values) v = kernels::cuda::Bf16BitsToFloat(kernels::cuda::FloatToBf16Bits(v));
}

}  // namespace pipecoord::worker::cuda

#endif  // PIPECOORD_WORKER_CUDA_CUDA_TEST_UTIL_H_
