// Data parallelism on the CUDA backend: a dp-replica step, whose OPT sums the replicas' device
// gradients with parallel::AllReduceSum (worker/parallel/collectives.h) and takes their mean on
// the device, equals one replica's step on the concatenated batch (dp x m micro-batches), as the
// CPU backend's dp runs equal the single-process reference (pipelined_training_test).
//
// Each rank runs the worker's own Executor over a CudaBackend on its own CudaDevice; tensors
// between ranks go through PoolTransport (pool_transport_for_tests.h). What is checked, on the
// first step's gradients (taken when OPT asks for them, before the ring, and when the optimizer
// step starts, after the mean), the losses of 3 steps and the weights after them:
//  1. Exactly: every replica ends the all-reduce with the same bits, and those bits are the host
//     ring's order of additions over the replicas' own gradients (chunk c sums replicas c, c+1,
//     ... left to right, one f32 rounding each) times 1/dp. The weights stay bit-identical
//     across replicas for every step.
//  2. Within rounding: the mean gradient against the gradient one replica accumulates over the
//     whole batch (the sums run in another order), the loss of each step and the final weights.
//     Metric: max|dp - one| / max|one| per tensor (kernels/cuda/normwise_error.h), relative error
//     for the loss; thresholds below, with the measured worst printed.
//
// Built twice: on a GPU (gpu-tagged, skips without one) and on the host double (_host, runs
// everywhere: CPU twins behind every launcher, host memory behind CudaDevice).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "jobplan/assignment.h"
#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "worker/cuda/cuda_backend.h"
#include "worker/cuda/cuda_test_util.h"
#include "worker/cuda/pool_transport_for_tests.h"
#include "worker/daemon/executor.h"

namespace pipecoord::worker::cuda {
namespace {

using kernels::cuda::CompareNormwise;

struct Case {
  int pp, dp, microbatches;  // m per replica; the reference runs dp * m
  std::string precision;
};

v1::JobSpec Spec(const Case& c, int dp, int microbatches) {
  const model::ModelConfig config = TestConfig();
  v1::JobSpec s;
  s.set_name("dp");
  s.set_schedule("1f1b");
  s.set_device("cuda");
  s.set_precision(c.precision);
  s.set_pp(c.pp);
  s.set_dp(dp);
  s.set_microbatches(microbatches);
  s.set_micro_batch_size(kTestMicroBatchSize);
  s.set_steps(3);
  s.set_learning_rate(1e-3);
  s.set_data_seed(5);
  v1::ModelSpec* m = s.mutable_model();
  m->set_layers(config.layers);
  m->set_hidden(config.hidden);
  m->set_ffn_hidden(config.ffn_hidden);
  m->set_heads(config.heads);
  m->set_vocab(config.vocab);
  m->set_seq_len(config.seq_len);
  m->set_seed(config.seed);
  return s;
}

// What one rank saw.
struct RankResult {
  Status status;
  std::vector<StepReport> reports;
  std::vector<float> before_ring, after_mean;  // step 0's gradients, in DeviceGradients' order
  std::vector<std::vector<float>> weights;     // fp32 masters after each step, in the same order
};

// Every gradient (or master) of the backend's stages, concatenated: DeviceGradients' order.
Result<std::vector<float>> Concatenated(CudaBackend& backend, const v1::Assignment& a, bool masters) {
  std::vector<int> stages;
  for (const v1::StageShard& s : a.shards()) stages.push_back(s.stage());
  std::sort(stages.begin(), stages.end());
  std::vector<float> out;
  for (int s : stages) {
    for (DeviceParameter& p : backend.stage(s)->parameters()) {
      auto values = ReadFloats(backend.device(), masters ? p.master : p.grad);
      if (!values.ok()) return values.status();
      out.insert(out.end(), values->begin(), values->end());
    }
  }
  return out;
}

// The CUDA backend as the executor sees it, reading the gradients when OPT takes them for the
// ring (DeviceGradients) and when the optimizer step starts (the mean), at step 0, and the
// masters after each optimizer step. Everything else passes through.
class Recording final : public ComputeBackend {
 public:
  Recording(CudaBackend* inner, const v1::Assignment& a, RankResult* out) : inner_(inner), a_(a), out_(out) {}

  kernels::TensorSpec BoundarySpec() const override { return inner_->BoundarySpec(); }
  Result<kernels::Tensor> Forward(int s, int mb, int step, kernels::Tensor in) override {
    step_ = step;
    return inner_->Forward(s, mb, step, std::move(in));
  }
  Result<kernels::Tensor> BackwardInput(int s, int mb, kernels::Tensor g) override {
    return inner_->BackwardInput(s, mb, std::move(g));
  }
  Status BackwardWeight(int s, int mb) override { return inner_->BackwardWeight(s, mb); }
  Result<kernels::Tensor> BackwardFull(int s, int mb, kernels::Tensor g) override {
    return inner_->BackwardFull(s, mb, std::move(g));
  }
  std::vector<std::span<float>> Gradients() override { return inner_->Gradients(); }
  parallel::FloatBuffer* DeviceGradients() override {
    if (step_ == 0 && out_->before_ring.empty()) recording_ = Record(false, &out_->before_ring);
    return inner_->DeviceGradients();
  }
  Status OptimizerStep(int step) override {
    PIPECOORD_RETURN_IF_ERROR(recording_);
    if (step == 0) PIPECOORD_RETURN_IF_ERROR(Record(false, &out_->after_mean));
    PIPECOORD_RETURN_IF_ERROR(inner_->OptimizerStep(step));
    return Record(true, &out_->weights.emplace_back());
  }
  bool StepLoss(double* loss) override { return inner_->StepLoss(loss); }
  uint64_t memory_in_use_bytes() const override { return inner_->memory_in_use_bytes(); }
  uint64_t memory_peak_bytes() const override { return inner_->memory_peak_bytes(); }
  void ResetPeak() override { inner_->ResetPeak(); }
  std::vector<StateTensor> CheckpointState() override { return inner_->CheckpointState(); }
  int64_t optimizer_steps() const override { return inner_->optimizer_steps(); }
  void set_optimizer_steps(int64_t steps) override { inner_->set_optimizer_steps(steps); }
  bool TimesOnDevice() const override { return inner_->TimesOnDevice(); }
  Status MarkBegin(int mark) override { return inner_->MarkBegin(mark); }
  Status MarkEnd(int mark) override { return inner_->MarkEnd(mark); }
  Result<std::vector<DeviceSpan>> ResolveMarks(int count, const std::function<int64_t()>& clock_ns) override {
    return inner_->ResolveMarks(count, clock_ns);
  }

 private:
  Status Record(bool masters, std::vector<float>* into) {
    auto values = Concatenated(*inner_, a_, masters);
    if (!values.ok()) return values.status();
    *into = std::move(values).value();
    return Status::Ok();
  }

  CudaBackend* inner_;
  const v1::Assignment& a_;
  RankResult* out_;
  int step_ = -1;
  Status recording_;  // a failed read in DeviceGradients, which cannot return it
};

// Runs `spec`: one thread, CudaDevice, backend and executor per global rank.
std::vector<RankResult> RunJob(const v1::JobSpec& raw) {
  const Status valid = jobplan::ValidateJobSpec(raw);
  EXPECT_TRUE(valid.ok()) << valid.ToString();
  const v1::JobSpec spec = jobplan::WithDefaults(raw);
  auto plan = jobplan::PlanJob(spec);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (!valid.ok() || !plan.ok()) return {};
  const int world = spec.pp() * std::max(1, spec.dp());
  Mailbox mailbox;
  std::vector<RankResult> results(world);
  std::vector<std::thread> threads;
  for (int g = 0; g < world; ++g) {
    threads.emplace_back([&, g] {
      RankResult& out = results[g];
      auto fail = [&](Status st) {
        out.status = std::move(st);
        mailbox.Shutdown();  // wake the other ranks: fail fast, never hang
      };
      const v1::Assignment a = jobplan::BuildAssignment("cuda-dp", spec, *plan, g, {}, 1);
      auto device = CudaDevice::Open(0);
      if (!device.ok()) return fail(device.status());
      std::shared_ptr<CudaDevice> shared = std::move(device).value();
      CudaBackendOptions options;
      options.shared_device = shared;
      auto backend = MakeCudaBackend(a, options);
      if (!backend.ok()) return fail(backend.status());
      Recording recording(backend->get(), a, &out);
      PoolTransport transport(g, shared.get(), &mailbox);
      ExecutorOptions eo;
      eo.recv_timeout = std::chrono::milliseconds(120000);
      Executor executor(a, &recording, &transport, eo);
      Status st = executor.Run([&](StepReport&& report) {
        out.reports.push_back(std::move(report));
        return Status::Ok();
      });
      if (!st.ok()) fail(st);
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

// The host ring's result for replica gradients `g` (collectives.h: chunk c = [c L / n, (c+1) L / n)
// sums replicas c, c+1, ..., c-1 mod n left to right, received + own in f32), times 1/n.
std::vector<float> HostRingMean(const std::vector<std::vector<float>>& g) {
  const size_t n = g.size(), len = g[0].size();
  std::vector<float> out(len);
  const float inv = 1.0f / static_cast<float>(n);
  for (size_t c = 0; c < n; ++c) {
    for (size_t k = c * len / n; k < (c + 1) * len / n; ++k) {
      float sum = g[c][k];
      for (size_t j = 1; j < n; ++j) sum = g[(c + j) % n][k] + sum;
      out[k] = sum * inv;
    }
  }
  return out;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Thresholds of check 2. The step-0 gradients differ only by the order their f32 sums run in
// (host double: about 1e-7). The losses and weights of later steps go through AdamW, which
// divides by each gradient element's own magnitude, and in bf16 through weights rounded to bf16,
// where a master that differs in its last bit can round to the neighbouring bf16 value (host
// double: weights about 1e-6 in fp32, 3e-8 in bf16; losses below 2e-9). The thresholds leave
// room for a GPU's own summation orders and are still far below what a wrong mean gives (a sum
// instead of a mean, or one replica's gradients: errors of order 1).
struct Tolerance {
  double gradient, loss, weights;
};
Tolerance TolerancesFor(const std::string& precision) {
  if (precision == "bf16") return {1e-4, 1e-3, 1e-3};
  return {1e-5, 1e-5, 1e-4};
}

using CudaDataParallelTestBase = CudaModelTestBase;  // skips without a GPU (not on the host double)
class CudaDataParallelTest : public CudaDataParallelTestBase, public ::testing::WithParamInterface<Case> {};

TEST_P(CudaDataParallelTest, AStepEqualsOneReplicasStepOnTheConcatenatedBatch) {
  const Case& c = GetParam();
  const std::vector<RankResult> dp = RunJob(Spec(c, c.dp, c.microbatches));
  const std::vector<RankResult> one = RunJob(Spec(c, 1, c.dp * c.microbatches));
  ASSERT_EQ(dp.size(), static_cast<size_t>(c.pp * c.dp));
  ASSERT_EQ(one.size(), static_cast<size_t>(c.pp));
  for (const RankResult& r : dp) ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  for (const RankResult& r : one) ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const Tolerance tol = TolerancesFor(c.precision);
  double worst_gradient = 0, worst_weights = 0, worst_loss = 0;

  for (int rank = 0; rank < c.pp; ++rank) {
    SCOPED_TRACE("pipeline rank " + std::to_string(rank));
    // 1. Exact: the all-reduce's bits on every replica, and the weights after every step.
    std::vector<std::vector<float>> before;
    for (int d = 0; d < c.dp; ++d) {
      const RankResult& r = dp[d * c.pp + rank];
      ASSERT_FALSE(r.before_ring.empty()) << "OPT never asked for the device gradients";
      ASSERT_EQ(r.after_mean.size(), r.before_ring.size());
      before.push_back(r.before_ring);
    }
    const std::vector<float> want = HostRingMean(before);
    for (int d = 0; d < c.dp; ++d) {
      const RankResult& r = dp[d * c.pp + rank];
      EXPECT_TRUE(SameBits(r.after_mean, want)) << "replica " << d << ": the mean is not the host ring's bits; "
                                                << CompareNormwise(r.after_mean, want).Describe();
      ASSERT_EQ(r.weights.size(), 3u);
      for (size_t step = 0; step < 3; ++step) {
        EXPECT_TRUE(SameBits(r.weights[step], dp[rank].weights[step])) << "replica " << d << " step " << step;
      }
    }
    // Replicas hold different data: the ring had something to do.
    EXPECT_FALSE(SameBits(before[0], before[1]));

    // 2. Against one replica on the whole batch.
    const RankResult& ref = one[rank];
    const auto g = CompareNormwise(dp[rank].after_mean, ref.after_mean);
    worst_gradient = std::max(worst_gradient, g.error);
    EXPECT_LE(g.error, tol.gradient) << "step 0 gradients: " << g.Describe();
    ASSERT_EQ(ref.weights.size(), 3u);
    const auto w = CompareNormwise(dp[rank].weights.back(), ref.weights.back());
    worst_weights = std::max(worst_weights, w.error);
    EXPECT_LE(w.error, tol.weights) << "weights after 3 steps: " << w.Describe();
  }
  // The loss of each step: the replicas' mean against the whole batch's (the head's rank).
  const int head = c.pp - 1;
  ASSERT_EQ(one[head].reports.size(), 3u);
  for (int step = 0; step < 3; ++step) {
    double sum = 0;
    for (int d = 0; d < c.dp; ++d) {
      const StepReport& r = dp[d * c.pp + head].reports.at(step);
      ASSERT_TRUE(r.summary.has_loss());
      sum += r.summary.loss();
    }
    const double want_loss = one[head].reports[step].summary.loss();
    const double err = RelativeError(sum / c.dp, want_loss);
    worst_loss = std::max(worst_loss, err);
    EXPECT_LE(err, tol.loss) << "step " << step << ": dp " << sum / c.dp << ", one replica " << want_loss;
  }
  std::printf("pp %d dp %d m %d %s: step 0's mean gradient bit-identical on every replica and equal to the host "
              "ring's; against one replica on %d micro-batches: gradient %.3g, loss %.3g, weights after 3 steps "
              "%.3g\n",
              c.pp, c.dp, c.microbatches, c.precision.c_str(), c.dp * c.microbatches, worst_gradient, worst_loss,
              worst_weights);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaDataParallelTest,
                         ::testing::Values(Case{1, 2, 2, "fp32"}, Case{2, 2, 2, "fp32"}, Case{1, 3, 2, "fp32"},
                                           Case{1, 2, 2, "bf16"}, Case{2, 2, 3, "bf16"}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const Case& c = info.param;
                           return "pp" + std::to_string(c.pp) + "_dp" + std::to_string(c.dp) + "_m" +
                                  std::to_string(c.microbatches) + "_" + c.precision;
                         });

}  // namespace
}  // namespace pipecoord::worker::cuda
