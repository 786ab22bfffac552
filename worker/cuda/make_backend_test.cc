// The CUDA backend's factory where it can run everywhere: precision names, the spec checks that
// come before the device, and MakeBackend for device "cuda": UNAVAILABLE "no CUDA device: ..."
// (the runtime's reason, as kernels::QueryDevices gives it) where there is no GPU, a working
// backend where there is one. Not tagged gpu: it runs, and checks something, on every machine.
#include <gtest/gtest.h>

#include "kernels/device.h"
#include "worker/cuda/cuda_backend.h"
#include "worker/cuda/precision.h"
#include "worker/daemon/backend_factory.h"

namespace pipecoord::worker::cuda {
namespace {

v1::Assignment TinyCudaAssignment() {
  v1::Assignment a;
  a.set_job_id("job");
  v1::JobSpec* s = a.mutable_spec();
  s->set_device("cuda");
  s->set_pp(1);
  s->set_microbatches(2);
  s->set_micro_batch_size(2);
  s->set_steps(1);
  s->set_learning_rate(1e-3);
  v1::ModelSpec* m = s->mutable_model();
  m->set_layers(2);
  m->set_hidden(32);
  m->set_heads(4);
  m->set_vocab(50);
  m->set_seq_len(8);
  m->set_seed(3);
  v1::StageShard* shard = a.add_shards();
  shard->set_stage(0);
  shard->set_first_layer(0);
  shard->set_num_layers(2);
  shard->set_has_embedding(true);
  shard->set_has_head(true);
  a.add_stage_to_rank(0);
  return a;
}

TEST(PrecisionTest, NamesRoundTripAndUnknownNamesAreRefused) {
  for (Precision p : {Precision::kFp32, Precision::kBf16}) {
    auto parsed = ParsePrecision(PrecisionName(p));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, p);
  }
  auto empty = ParsePrecision("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, Precision::kFp32);
  auto bad = ParsePrecision("fp16");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "precision: must be \"fp32\" or \"bf16\", got \"fp16\"");
  EXPECT_EQ(ActivationDType(Precision::kFp32), kernels::DType::kF32);
  EXPECT_EQ(ActivationDType(Precision::kBf16), kernels::DType::kBF16);
}

TEST(MakeBackendTest, CudaIsUnavailableWithoutADeviceAndWorksWithOne) {
  const v1::Assignment a = TinyCudaAssignment();
  auto devices = kernels::QueryDevices();
  auto backend = MakeBackend(a);
  if (!devices.ok()) {
    // No GPU here: the device's own reason, never a crash and never a CPU fallback.
    ASSERT_EQ(devices.status().code(), Code::kUnavailable) << devices.status().ToString();
    ASSERT_FALSE(backend.ok());
    EXPECT_EQ(backend.status().code(), Code::kUnavailable) << backend.status().ToString();
    EXPECT_EQ(backend.status().message().rfind("no CUDA device: ", 0), 0u) << backend.status().ToString();
    EXPECT_EQ(backend.status().message(), devices.status().message());
    return;
  }
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  const kernels::TensorSpec want{kernels::DType::kF32, {2, 8, 32}};
  EXPECT_EQ((*backend)->BoundarySpec(), want);
  EXPECT_TRUE((*backend)->Gradients().empty());  // device gradients: no host spans
  EXPECT_GT((*backend)->memory_in_use_bytes(), 0u);  // the weights, from the caching pool
  auto out = (*backend)->Forward(0, 0, 0, kernels::Tensor());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(out->empty());  // the head stage's F gives the loss, not activations
}

TEST(MakeBackendTest, SpecErrorsComeBeforeTheDevice) {
  v1::Assignment a = TinyCudaAssignment();
  a.mutable_spec()->mutable_model()->set_heads(3);  // 32 is not a multiple of 3
  auto backend = MakeCudaBackend(a);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), Code::kInvalidArgument) << backend.status().ToString();
  EXPECT_NE(backend.status().message().find("hidden"), std::string::npos) << backend.status().ToString();

  a = TinyCudaAssignment();
  a.mutable_shards(0)->set_num_layers(3);  // past the model's 2 layers
  backend = MakeCudaBackend(a);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), Code::kInvalidArgument) << backend.status().ToString();

  a = TinyCudaAssignment();
  a.mutable_spec()->set_precision("fp16");
  backend = MakeCudaBackend(a);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().message(), "spec.precision: must be \"fp32\" or \"bf16\", got \"fp16\"");
}

// dp > 1 builds: the spec passes, and on a GPU the backend hands its gradients to the device
// all-reduce (every parameter's, all of them). Without a GPU: the device's reason, as for dp 1.
TEST(MakeBackendTest, DataParallelBuildsAndGivesItsGradientsOnTheDevice) {
  v1::Assignment a = TinyCudaAssignment();
  a.mutable_spec()->set_dp(2);
  a.set_dp_rank(1);
  auto devices = kernels::QueryDevices();
  auto backend = MakeCudaBackend(a);
  if (!devices.ok()) {
    ASSERT_FALSE(backend.ok());
    EXPECT_EQ(backend.status().code(), Code::kUnavailable) << backend.status().ToString();
    EXPECT_EQ(backend.status().message(), devices.status().message());
    return;
  }
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  EXPECT_TRUE((*backend)->Gradients().empty());
  parallel::FloatBuffer* grads = (*backend)->DeviceGradients();
  ASSERT_NE(grads, nullptr);
  size_t params = 0;
  for (const DeviceParameter& p : (*backend)->stage(0)->parameters()) params += static_cast<size_t>(p.numel());
  EXPECT_EQ(grads->size(), params);
  EXPECT_GT(params, 0u);
}

}  // namespace
}  // namespace pipecoord::worker::cuda
