// A whole model (embedding, blocks, head) trained with tensor parallelism equals the
// single-process ReferenceTrainer: tp 2 and 4 ranks, each a StageModel with its slices on its own
// thread over a real TCP ring, B and W split, AdamW: every step's loss within 1e-5, every rank
// the same loss, and the weights after the steps (each rank's slices) against the reference's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "worker/model/reference_trainer.h"
#include "worker/model/stage_model.h"
#include "worker/model/synthetic_data.h"
#include "worker/model/weight_init.h"
#include "worker/parallel/tensor_parallel.h"
#include "worker/transport/test_util.h"

namespace pipecoord::model {
namespace {

// TensorParallelSlice as the model's buffer type.
template <typename... A>
kernels::HostBuffer<float> BufferSlice(A&&... args) {
  return kernels::ToHostBuffer(TensorParallelSlice(std::forward<A>(args)...));
}

using worker::parallel::Group;
using worker::parallel::RingTensorParallel;

const ModelConfig kConfig{2, 32, 64, 4, 64, 8, 7};  // layers, h, ffn, heads, vocab, s, seed
constexpr int kSteps = 3;

TrainOptions Options() {
  TrainOptions o;
  o.batch = BatchShape{2, 2};
  o.adamw.lr = 1e-2;
  o.adamw.weight_decay = 0.1;
  // AdamW's first update is lr x sign(g) for any g >> eps: a gradient of rounding-noise size
  // (1e-9) whose sign differs between two summation orders moves that weight by 2 lr. eps 1e-4
  // keeps such updates linear in g (lr g / eps), so the weights compare the arithmetic of the two
  // runs rather than the sign of noise (with eps 1e-8 the worst element differs by 7e-4 of
  // max|w| after 3 steps, while every step-0 gradient agrees to 4e-7).
  o.adamw.eps = 1e-4;
  return o;
}

struct RankRun {
  kernels::HostBuffer<double> losses;
  std::vector<std::pair<std::string, kernels::HostBuffer<float>>> first_grads;  // step 0's, before AdamW
  std::vector<std::pair<std::string, kernels::HostBuffer<float>>> params;
  Status status;
};

RankRun Train(int tp, int rank, worker::parallel::TensorParallel* group) {
  RankRun out;
  const TrainOptions o = Options();
  auto model = StageModel::Create(kConfig, WholeModel(kConfig), o.batch, group);
  if (!model.ok()) {
    out.status = model.status();
    return out;
  }
  StageModel& m = **model;
  const SyntheticData data(kConfig.seed, kConfig.vocab, kConfig.seq_len, o.batch.micro_batch_size, o.data_noise);
  for (int step = 0; step < kSteps; ++step) {
    m.ZeroGrad();
    double loss = 0;
    for (int mb = 0; mb < o.batch.microbatches; ++mb) {
      TokenBatch b = data.Batch(step, mb);
      auto f = m.Forward(mb, StageInput{kernels::ToHostBuffer(b.inputs), {}, kernels::ToHostBuffer(b.targets)});
      if (!f.ok()) {
        out.status = f.status();
        return out;
      }
      loss += *f->loss;
      auto dx = m.BackwardInput(mb, {});
      if (dx.ok()) out.status = m.BackwardWeight(mb);
      if (!dx.ok()) out.status = dx.status();
      if (!out.status.ok()) return out;
    }
    out.losses.push_back(loss / o.batch.microbatches);
    if (step == 0) {
      for (const ParameterRef& p : m.Parameters()) {
        out.first_grads.emplace_back(std::string(p.name), kernels::HostBuffer<float>(p.grad.begin(), p.grad.end()));
      }
    }
    out.status = m.OptimizerStep(o.adamw);
    if (!out.status.ok()) return out;
  }
  for (const ParameterRef& p : m.Parameters()) {
    out.params.emplace_back(std::string(p.name), kernels::HostBuffer<float>(p.value.begin(), p.value.end()));
  }
  (void)tp;
  (void)rank;
  return out;
}

// max |a - b| / max |b| over a tensor, and the L2 ratio |a - b| / |b|.
struct Errors {
  double max = 0, l2 = 0;
};
Errors Compare(const kernels::HostBuffer<float>& got, const kernels::HostBuffer<float>& want) {
  double err = 0, scale = 0, d2 = 0, w2 = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    err = std::max(err, std::fabs(d));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    d2 += d * d;
    w2 += static_cast<double>(want[i]) * want[i];
  }
  return {scale > 0 ? err / scale : err, w2 > 0 ? std::sqrt(d2 / w2) : std::sqrt(d2)};
}

TEST(StageModelTensorParallelTest, TrainingEqualsTheSingleProcessReference) {
  // Step 0's gradients of the reference: one tp 1 run of the same code.
  const RankRun one = Train(1, 0, nullptr);
  ASSERT_TRUE(one.status.ok()) << one.status.ToString();
  auto ref = ReferenceTrainer::Create(kConfig, Options());
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  auto want = (*ref)->Train(kSteps);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (int tp : {2, 4}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    auto mesh = worker::testing::MakeMesh(tp);
    ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
    std::vector<int> ranks(tp);
    for (int i = 0; i < tp; ++i) ranks[i] = i;
    std::vector<RankRun> runs(tp);
    std::vector<std::thread> threads;
    for (int r = 0; r < tp; ++r) {
      threads.emplace_back([&, r] {
        RingTensorParallel group((*mesh)[r].get(), Group{ranks, r}, std::chrono::seconds(30));
        runs[r] = Train(tp, r, &group);
      });
    }
    for (auto& t : threads) t.join();
    double worst_loss = 0, worst_weight = 0, worst_weight_l2 = 0, worst_grad = 0;
    for (int r = 0; r < tp; ++r) {
      ASSERT_TRUE(runs[r].status.ok()) << runs[r].status.ToString();
      ASSERT_EQ(runs[r].losses.size(), want->size());
      for (int s = 0; s < kSteps; ++s) {
        EXPECT_EQ(runs[r].losses[s], runs[0].losses[s]) << "every rank the same loss";
        worst_loss = std::max(worst_loss, std::fabs(runs[r].losses[s] - (*want)[s]) / std::fabs((*want)[s]));
      }
      for (const auto& [name, value] : runs[r].params) {
        auto whole = (*ref)->model().FindParameter(name);
        ASSERT_TRUE(whole.ok()) << name;
        const auto [rows, cols] = RowsCols(whole->shape);
        const kernels::HostBuffer<float> slice =
            BufferSlice(std::vector<float>(whole->value.begin(), whole->value.end()), rows, cols,
                                TpSplitOf(name), tp, r);
        ASSERT_EQ(slice.size(), value.size()) << name;
        const Errors e = Compare(value, slice);
        worst_weight = std::max(worst_weight, e.max);
        worst_weight_l2 = std::max(worst_weight_l2, e.l2);
      }
      for (size_t i = 0; i < runs[r].first_grads.size(); ++i) {
        const auto& [name, grad] = runs[r].first_grads[i];
        ASSERT_EQ(one.first_grads[i].first, name);
        auto whole = (*ref)->model().FindParameter(name);
        const auto [rows, cols] = RowsCols(whole->shape);
        const Errors e =
            Compare(grad, BufferSlice(one.first_grads[i].second, rows, cols, TpSplitOf(name), tp, r));
        worst_grad = std::max(worst_grad, e.max);
      }
    }
    std::printf("tp %d: worst step-loss relative error %.3g; step-0 gradients max|d|/max|g| %.3g; weights after %d "
                "steps max|d|/max|w| %.3g, |d|/|w| %.3g\n",
                tp, worst_loss, worst_grad, kSteps, worst_weight, worst_weight_l2);
    EXPECT_LE(worst_loss, 1e-5);
    EXPECT_LE(worst_grad, 1e-5);
    EXPECT_LE(worst_weight, 1e-5);
  }
}

}  // namespace
}  // namespace pipecoord::model
