#include "worker/model/stage_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/gradient_check.h"
#include "kernels/cpu/rng.h"
#include "kernels/host_pool.h"
#include "worker/model/synthetic_data.h"

namespace pipecoord::model {
namespace {

const ModelConfig kConfig{4, 32, 0, 2, 64, 16, 42};  // layers, h, ffn, heads, vocab, s, seed
const BatchShape kBatch{2, 1};

std::unique_ptr<StageModel> Make(const StageShard& shard, BatchShape batch = kBatch) {
  auto m = StageModel::Create(kConfig, shard, batch);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

kernels::HostBuffer<float> Activations(uint64_t seed) {
  kernels::HostBuffer<float> x(static_cast<size_t>(kBatch.micro_batch_size) * kConfig.seq_len *
                       kConfig.hidden);
  kernels::cpu::Rng(seed).FillUniform(x.data(), static_cast<int64_t>(x.size()), -1, 1);
  return x;
}

TEST(StageModelTest, CreateRefusesBadConfigAndShard) {
  ModelConfig bad = kConfig;
  bad.vocab = 0;
  EXPECT_EQ(StageModel::Create(bad, WholeModel(kConfig), kBatch).status().message(),
            "vocab: must be > 0, got 0");
  EXPECT_EQ(StageModel::Create(kConfig, StageShard{1, 3, 2, false, false}, kBatch)
                .status()
                .message(),
            "stage 1: layers [3, 5) must lie inside [0, 4)");
  EXPECT_FALSE(StageModel::Create(kConfig, WholeModel(kConfig), BatchShape{0, 1}).ok());
}

TEST(StageModelTest, WeightsDependOnTheGlobalLayerNotOnThePartition) {
  auto whole = Make(WholeModel(kConfig));
  auto middle = Make(StageShard{1, 2, 2, false, false});  // layers 2 and 3 only
  auto first = Make(StageShard{0, 0, 1, true, false});
  std::vector<std::string> names;
  for (const ParameterRef& p : middle->Parameters()) {
    names.emplace_back(p.name);
    auto same = whole->FindParameter(p.name);
    ASSERT_TRUE(same.ok()) << p.name;
    ASSERT_EQ(p.value.size(), same->value.size());
    for (size_t i = 0; i < p.value.size(); ++i) ASSERT_EQ(p.value[i], same->value[i]) << p.name;
  }
  ASSERT_EQ(names.size(), 18u);
  EXPECT_EQ(names[0], "layers.2.attention_norm.weight");
  EXPECT_EQ(names[17], "layers.3.feed_forward.w3.weight");
  EXPECT_TRUE(first->FindParameter("tok_embeddings.weight").ok());
  EXPECT_EQ(first->FindParameter("output.weight").status().code(), Code::kNotFound);
  EXPECT_TRUE(whole->FindParameter("norm.weight").ok());
  // Different layers and different seeds give different weights.
  auto l2 = whole->FindParameter("layers.2.attention.wq.weight");
  auto l3 = whole->FindParameter("layers.3.attention.wq.weight");
  EXPECT_NE(l2->value[0], l3->value[0]);
  ModelConfig other = kConfig;
  other.seed = 43;
  auto reseeded = StageModel::Create(other, WholeModel(other), kBatch);
  EXPECT_NE((*reseeded)->FindParameter("layers.2.attention.wq.weight")->value[0], l2->value[0]);
  EXPECT_EQ(whole->ParameterBytes(),
            16 * (2 * 64 * 32 + 32 + 4 * (2 * 32 + 4 * 32 * 32 + 3 * 128 * 32)));
}

TEST(StageModelTest, MisuseIsRefusedWithTheReason) {
  auto mid = Make(StageShard{1, 1, 2, false, false});
  EXPECT_EQ(mid->Forward(0, StageInput{{}, kernels::HostBuffer<float>(5), {}}).status().message(),
            "activations: expected 1024 floats (micro_batch_size x seq_len x hidden), got 5");
  EXPECT_EQ(mid->Forward(0, StageInput{{}, Activations(1), kernels::HostBuffer<int32_t>(32)})
                .status()
                .message(),
            "targets: only the head stage reads targets, got 32");
  EXPECT_EQ(mid->BackwardInput(0, Activations(2)).status().message(),
            "micro-batch 0: input gradient (B) needs its forward first");
  ASSERT_TRUE(mid->Forward(0, StageInput{{}, Activations(1), {}}).ok());
  EXPECT_EQ(mid->Forward(0, StageInput{{}, Activations(1), {}}).status().message(),
            "micro-batch 0: forward already ran and its backward is pending");
  EXPECT_EQ(mid->BackwardWeight(0).message(),
            "micro-batch 0: weight gradient (W) needs its input gradient (B) first");
  EXPECT_EQ(mid->BackwardInput(0, {}).status().message(),
            "grad_output: expected 1024 floats (micro_batch_size x seq_len x hidden), got 0");
  ASSERT_TRUE(mid->BackwardInput(0, Activations(2)).ok());
  EXPECT_EQ(mid->BackwardInput(0, Activations(2)).status().message(),
            "micro-batch 0: input gradient (B) already ran; its weight gradient (W) is pending");
  EXPECT_EQ(mid->OptimizerStep({}).message(),
            "1 micro-batch(es) still in flight (first: micro-batch 0); run their backward passes "
            "before the optimizer step");
  EXPECT_TRUE(mid->BackwardWeight(0).ok());
  kernels::cpu::AdamWOptions bad;
  bad.beta2 = 1.0;
  EXPECT_EQ(mid->OptimizerStep(bad).message(),
            "beta2: must be in [0.000000, 1.000000), got 1.000000");
  bad = {};
  bad.lr = -1;
  EXPECT_EQ(mid->OptimizerStep(bad).code(), Code::kInvalidArgument);
  EXPECT_EQ(mid->optimizer_steps(), 0);
  EXPECT_TRUE(mid->OptimizerStep({}).ok());
  EXPECT_EQ(mid->optimizer_steps(), 1);

  auto whole = Make(WholeModel(kConfig));
  kernels::HostBuffer<int32_t> ids(32, 3);
  ids[7] = 64;
  EXPECT_EQ(whole->Forward(0, StageInput{ids, {}, kernels::HostBuffer<int32_t>(32)}).status().message(),
            "tokens[7]: must be in [0, 64), got 64");
  ids[7] = 0;
  EXPECT_EQ(whole->Forward(0, StageInput{ids, {}, {}}).status().message(),
            "targets: expected 32 ids (micro_batch_size x seq_len), got 0");
  EXPECT_EQ(whole->Forward(-1, StageInput{ids, {}, ids}).status().message(),
            "micro-batch -1: ids must be >= 0");
  ASSERT_TRUE(whole->Forward(0, StageInput{ids, {}, ids}).ok());
  EXPECT_EQ(whole->BackwardInput(0, Activations(3)).status().message(),
            "grad_output: the head stage starts from its loss; pass none, got 1024 floats");
}

// Logits(mb): the head's [b s, vocab] logits between F and B, whose cross-entropy (the formula,
// in double, here) is the loss F returned; refused off the head stage and outside F..B.
TEST(StageModelTest, LogitsAreWhatTheLossWasComputedFrom) {
  EXPECT_EQ(Make(StageShard{1, 1, 2, false, false})->Logits(0).status().message(), "logits: only the head stage has them");
  auto whole = Make(WholeModel(kConfig));
  kernels::HostBuffer<int32_t> ids(32), targets(32);
  for (int i = 0; i < 32; ++i) ids[i] = (7 * i) % 64, targets[i] = (5 * i + 3) % 64;
  EXPECT_EQ(whole->Logits(0).status().code(), Code::kFailedPrecondition);
  auto out = whole->Forward(0, StageInput{ids, {}, targets});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  auto logits = whole->Logits(0);
  ASSERT_TRUE(logits.ok()) << logits.status().ToString();
  ASSERT_EQ(logits->size(), 32u * 64u);
  double loss = 0;
  for (int t = 0; t < 32; ++t) {
    const float* row = logits->data() + t * 64;
    double m = row[0], sum = 0;
    for (int v = 1; v < 64; ++v) m = std::max<double>(m, row[v]);
    for (int v = 0; v < 64; ++v) sum += std::exp(row[v] - m);
    loss += (std::log(sum) + m - row[targets[t]]) / 32;
  }
  EXPECT_NEAR(loss, *out->loss, 1e-6 * loss);
  EXPECT_EQ(whole->Logits(1).status().message(), "logits: micro-batch 1 has no forward whose backward is still to run");
  ASSERT_TRUE(whole->BackwardFull(0, {}).ok());
  EXPECT_EQ(whole->Logits(0).status().code(), Code::kFailedPrecondition);
}

// Measured by the rank's counting allocator, against closed forms of the stage's tensors.
TEST(StageModelTest, ActivationMemoryGrowsWithForwardShrinksWithBAndIsFreedByW) {
  kernels::CountingHostAllocator pool;
  const kernels::ScopedHostPool scope(&pool);
  auto mid = Make(StageShard{1, 1, 2, false, false});
  // Two blocks of 2 h + 4 h^2 + 3 h ffn parameters, each with a gradient and two moments (fp32).
  const int64_t weights = 2 * (2 * 32 + 4 * 32 * 32 + 3 * 32 * 128) * 4 * 4;
  EXPECT_EQ(pool.owned_bytes(), weights);
  auto held = [&] { return pool.owned_bytes() - weights; };
  EXPECT_EQ(mid->ActivationBytes(), 0);
  ASSERT_TRUE(mid->Forward(0, StageInput{{}, Activations(1), {}}).ok());
  const int64_t one = held();
  EXPECT_EQ(mid->ActivationBytes(), one);
  // Per block (b*s = 32 tokens, h 32, ffn 128, 2 heads): x, a, q, k, v, o, x1, c [32 x 32],
  // rstd1, rstd2 [32], gate, up, z [32 x 128], probs [2 x 2 x 16 x 16].
  EXPECT_EQ(one, 2 * 4 * (8 * 32 * 32 + 2 * 32 + 3 * 32 * 128 + 2 * 2 * 16 * 16));
  ASSERT_TRUE(mid->Forward(1, StageInput{{}, Activations(2), {}}).ok());
  EXPECT_EQ(held(), 2 * one);
  auto dx = mid->BackwardInput(1, Activations(3));
  ASSERT_TRUE(dx.ok());
  const int64_t boundary = 32 * 32 * 4;  // dx, about to leave: the rank's until handed on
  EXPECT_EQ(static_cast<int64_t>(dx->size() * 4), boundary);
  // B frees q, k, v, probs, gate, up and adds dy, dgate, dup, dc, dx1, dq, dk, dv, da.
  // Kept from F: x, a, o, x1, c [32 x 32], rstd1, rstd2 [32], z [32 x 128]. B's state is
  // larger than F's here: zero-bubble's price for deferring W.
  const int64_t after_b = 2 * 4 * (5 * 32 * 32 + 2 * 32 + 32 * 128 +  // kept from F
                                   7 * 32 * 32 + 2 * 32 * 128);         // from B
  EXPECT_EQ(held(), one + after_b + boundary);
  dx = kernels::HostBuffer<float>();
  ASSERT_TRUE(mid->BackwardWeight(1).ok());
  EXPECT_EQ(held(), one);
  ASSERT_TRUE(mid->BackwardFused(0, Activations(4)).ok());
  EXPECT_EQ(held(), 0);
  EXPECT_EQ(mid->ActivationBytes(), 0);
  EXPECT_EQ(mid->MicroBatchesInFlight(), 0);
}

// Two micro-batches through the whole model with BackwardInput + BackwardWeight or BackwardFused.
struct Outcome {
  double loss = 0;
  std::vector<kernels::HostBuffer<float>> grads;
};
Outcome TwoMicroBatches(bool fused) {
  auto m = Make(WholeModel(kConfig), BatchShape{2, 2});
  SyntheticData data(kConfig.seed, kConfig.vocab, kConfig.seq_len, 2);
  Outcome run;
  for (int mb = 0; mb < 2; ++mb) {
    TokenBatch b = data.Batch(0, mb);
    auto out = m->Forward(mb, StageInput{kernels::ToHostBuffer(b.inputs), {}, kernels::ToHostBuffer(b.targets)});
    EXPECT_TRUE(out.ok());
    run.loss += *out->loss;
    auto dx = fused ? m->BackwardFused(mb, {}) : m->BackwardInput(mb, {});
    EXPECT_TRUE(dx.ok());
    EXPECT_TRUE(dx->empty());  // the embedding stage has no input gradient
    if (!fused) {
      EXPECT_TRUE(m->BackwardWeight(mb).ok());
    }
  }
  for (const ParameterRef& p : m->Parameters()) {
    run.grads.emplace_back(p.grad.begin(), p.grad.end());
  }
  return run;
}

// The replay probe: F run again on what F kept gives its output bit for bit, for a first, a
// middle (every recompute mode) and a head-only stage; it leaves the measured peak and the
// micro-batch alone (its temporaries, one block's F at most, are freed: the rank's allocator
// holds what it held before); after B the input is gone and the replay is refused with the reason.
TEST(StageModelTest, ReplayForwardGivesForwardsOutputBitForBit) {
  SyntheticData data(kConfig.seed, kConfig.vocab, kConfig.seq_len, kBatch.micro_batch_size);
  const TokenBatch b = data.Batch(3, 1);
  auto tokens = [&] { return kernels::ToHostBuffer(b.inputs); };
  auto targets = [&] { return kernels::ToHostBuffer(b.targets); };
  kernels::CountingHostAllocator pool;
  const kernels::ScopedHostPool scope(&pool);
  {
    auto first = Make(StageShard{0, 0, 2, true, false});
    auto out = first->Forward(5, StageInput{tokens(), {}, {}});
    ASSERT_TRUE(out.ok());
    const int64_t before = pool.owned_bytes() + static_cast<int64_t>(out->activations.size() * sizeof(float));
    auto again = first->ReplayForward(5);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->activations, out->activations);
    EXPECT_EQ(pool.owned_bytes(), before);  // only the replay's output is new
    EXPECT_EQ(first->MicroBatchesInFlight(), 1);
    EXPECT_TRUE(first->Replayable(5));
  }
  for (const Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    auto mid = Make(StageShard{1, 2, 2, false, false});
    mid->SetRecompute(r);
    auto out = mid->Forward(0, StageInput{{}, Activations(11), {}});
    ASSERT_TRUE(out.ok());
    auto again = mid->ReplayForward(0);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->activations, out->activations) << static_cast<int>(r);
    kernels::HostBuffer<float> dy(out->activations.size(), 0.25f);
    ASSERT_TRUE(mid->BackwardInput(0, std::move(dy)).ok());
    EXPECT_FALSE(mid->Replayable(0));
    EXPECT_EQ(mid->ReplayForward(0).status().message(),
              "micro-batch 0: replay needs the input its F read, released by its B");
  }
  {
    auto head = Make(StageShard{2, 4, 0, false, true});
    auto out = head->Forward(2, StageInput{{}, Activations(12), targets()});
    ASSERT_TRUE(out.ok());
    auto again = head->ReplayForward(2);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    ASSERT_TRUE(again->loss.has_value());
    EXPECT_EQ(*again->loss, *out->loss);  // the same double, bit for bit
    EXPECT_EQ(head->ReplayForward(3).status().message(), "micro-batch 3: replay needs its forward first");
  }
}

// The seeded replay: two replicas (two models of the same stage) give the same bits for one seed,
// other bits for another, and a micro-batch in flight is left alone.
TEST(StageModelTest, SeededForwardIsTheSameOnEveryReplica) {
  for (const StageShard& shard : {StageShard{0, 0, 2, true, false}, StageShard{1, 2, 2, false, false},
                                  StageShard{2, 4, 0, false, true}}) {
    auto a = Make(shard), b = Make(shard);
    ASSERT_TRUE(b->Forward(0, shard.has_embedding ? StageInput{kernels::ToHostBuffer(SyntheticData(kConfig.seed, kConfig.vocab, kConfig.seq_len, kBatch.micro_batch_size).Batch(0, 0).inputs), {}, {}}
                                                  : StageInput{{}, Activations(3), shard.has_head ? kernels::ToHostBuffer(SyntheticData(kConfig.seed, kConfig.vocab, kConfig.seq_len, kBatch.micro_batch_size).Batch(0, 0).targets) : kernels::HostBuffer<int32_t>()})
                    .ok());
    auto x = a->SeededForward(77), y = b->SeededForward(77), z = a->SeededForward(78);
    ASSERT_TRUE(x.ok() && y.ok() && z.ok()) << x.status().ToString();
    EXPECT_EQ(x->activations, y->activations);
    EXPECT_EQ(x->loss, y->loss);
    if (shard.has_head) {
      EXPECT_NE(*x->loss, *z->loss);
    } else {
      EXPECT_NE(x->activations, z->activations);
    }
    EXPECT_EQ(b->MicroBatchesInFlight(), 1);
  }
}

TEST(StageModelTest, SplitBackwardEqualsFusedBackwardBitForBit) {
  const Outcome split = TwoMicroBatches(false), fused = TwoMicroBatches(true);
  EXPECT_EQ(split.loss, fused.loss);
  ASSERT_EQ(split.grads.size(), 2u + 4 * 9 + 1);
  for (size_t i = 0; i < split.grads.size(); ++i) EXPECT_EQ(split.grads[i], fused.grads[i]) << i;
  for (const auto& g : split.grads) {  // every tensor learns something
    double norm = 0;
    for (float v : g) norm += std::fabs(v);
    EXPECT_GT(norm, 0.0);
  }
}

// Directional finite differences of the float model's loss, per parameter tensor and for the
// input activations of a stage without the embedding. Float forward passes limit the accuracy
// (the double-precision checks of each block and op are in their own tests).
TEST(StageModelTest, GradientsMatchDirectionalFiniteDifferencesInFloat) {
  auto m = Make(StageShard{1, 2, 2, false, true});  // two blocks and the head
  SyntheticData data(kConfig.seed, kConfig.vocab, kConfig.seq_len, 2);
  const TokenBatch b = data.Batch(0, 0);
  const kernels::HostBuffer<float> x = Activations(9);
  auto loss = [&](const kernels::HostBuffer<float>& input) {
    auto out = m->Forward(100, StageInput{{}, input, kernels::ToHostBuffer(b.targets)});
    EXPECT_TRUE(out.ok());
    EXPECT_TRUE(m->BackwardFused(100, {}).ok());  // retire the micro-batch
    return *out->loss;
  };
  m->ZeroGrad();
  ASSERT_TRUE(m->Forward(0, StageInput{{}, x, kernels::ToHostBuffer(b.targets)}).ok());
  auto dx = m->BackwardFull(0, {});
  ASSERT_TRUE(dx.ok());
  // Keep the analytic gradients before the probes add to them.
  std::vector<kernels::HostBuffer<float>> grads;
  for (const ParameterRef& p : m->Parameters()) grads.emplace_back(p.grad.begin(), p.grad.end());
  double worst = 0;
  auto check = [&](const char* what, std::span<float> values, const kernels::HostBuffer<float>& grad,
                   uint64_t seed, kernels::HostBuffer<float>* input) {
    // A unit-length random direction (a step of 0.1 along it moves each element by little).
    // Richardson extrapolation of the central differences with steps 0.2 and 0.1 cancels their
    // O(eps^2) truncation error; large steps keep the float loss's rounding noise small.
    std::vector<double> dir = kernels::cpu::testing::RandomVector(values.size(), seed);
    double len = 0;
    for (double d : dir) len += d * d;
    for (double& d : dir) d /= std::sqrt(len);
    double analytic = 0;
    for (size_t i = 0; i < dir.size(); ++i) analytic += dir[i] * grad[i];
    const kernels::HostBuffer<float> keep(values.begin(), values.end());
    auto shifted = [&](double s) {
      for (size_t i = 0; i < dir.size(); ++i) values[i] = static_cast<float>(keep[i] + s * dir[i]);
      const double l = loss(input ? *input : x);
      std::copy(keep.begin(), keep.end(), values.begin());
      return l;
    };
    auto central = [&](double eps) { return (shifted(eps) - shifted(-eps)) / (2 * eps); };
    const double numeric = (4 * central(0.1) - central(0.2)) / 3;
    const double err = std::fabs(analytic - numeric) / std::fabs(numeric);
    std::printf("fd-float %-36s analytic %+.6e numeric %+.6e rel error %.2e\n", what, analytic,
                numeric, err);
    worst = std::max(worst, err);
    // 2e-3 relative, and an absolute floor for directions along which the loss barely moves: the
    // float loss (fp32 GEMM sums, kernels/cpu/linear.h) carries rounding of about 1e-7 of its
    // value (~3.5) per evaluation, which the differences divide by their steps (0.2, 0.4), so a
    // derivative near 1e-4 is known to a few 1e-7 at best.
    EXPECT_LT(std::fabs(analytic - numeric), 2e-3 * std::fabs(numeric) + 5e-7) << what;
  };
  kernels::HostBuffer<float> input = x;
  check("stage input activations (B)", input, *dx, 1, &input);
  size_t i = 0;
  for (const ParameterRef& p : m->Parameters()) {
    check(std::string(p.name).c_str(), p.value, grads[i], 10 + i, nullptr);
    ++i;
  }
  std::printf("fd-float worst rel error %.2e\n", worst);
}

// ZeRO-1's shards: with the same gradients, shard i of 3 updates exactly the flat elements
// [i N/3, (i+1) N/3) (parameters in model order), each to the bits the unsharded step gives, and
// leaves every other element as it was; the moment buffers hold ceil(N/3) floats each.
TEST(StageModelTest, ShardedOptimizerStepsItsShardOnlyAndExactly) {
  const StageShard shard{0, 0, 2, true, true};
  SyntheticData data(kConfig.seed, kConfig.vocab, kConfig.seq_len, 2);
  const TokenBatch b = data.Batch(0, 0);
  auto with_grads = [&](int shards, int index) {
    auto m = Make(shard);
    if (shards > 1) {
      EXPECT_TRUE(m->ShardOptimizerStates(shards, index).ok());
    }
    EXPECT_TRUE(m->Forward(0, StageInput{kernels::ToHostBuffer(b.inputs), {}, kernels::ToHostBuffer(b.targets)}).ok());
    EXPECT_TRUE(m->BackwardFull(0, {}).ok());
    return m;
  };
  auto flat = [](StageModel& m) {
    kernels::HostBuffer<float> v;
    for (const ParameterRef& p : m.Parameters()) v.insert(v.end(), p.value.begin(), p.value.end());
    return v;
  };
  auto whole = with_grads(1, 0);
  const kernels::HostBuffer<float> before = flat(*whole);
  const int64_t bytes_unsharded = whole->ParameterBytes();
  kernels::cpu::AdamWOptions o;
  o.lr = 0.01;
  o.weight_decay = 0.1;
  ASSERT_TRUE(whole->OptimizerStep(o).ok());
  const kernels::HostBuffer<float> after = flat(*whole);
  const int64_t n = static_cast<int64_t>(before.size());
  for (int i = 0; i < 3; ++i) {
    auto m = with_grads(3, i);
    EXPECT_EQ(m->OptimizerShard(), std::make_pair(i * n / 3, (i + 1) * n / 3));
    EXPECT_EQ(m->ParameterBytes(), bytes_unsharded - 8 * n + 8 * ((n + 2) / 3));
    ASSERT_TRUE(m->OptimizerStep(o).ok());
    const kernels::HostBuffer<float> got = flat(*m);
    int64_t changed = 0;
    for (int64_t k = 0; k < n; ++k) {
      const bool mine = k >= i * n / 3 && k < (i + 1) * n / 3;
      ASSERT_EQ(got[k], mine ? after[k] : before[k]) << "shard " << i << " element " << k;
      changed += got[k] != before[k];
    }
    EXPECT_GT(changed, (n / 3) * 9 / 10);  // the step moved (almost) all of its shard
  }
  auto m = Make(shard);
  EXPECT_EQ(m->ShardOptimizerStates(3, 3).code(), Code::kInvalidArgument);
  ASSERT_TRUE(m->OptimizerStep(o).ok());
  EXPECT_EQ(m->ShardOptimizerStates(2, 0).code(), Code::kFailedPrecondition);
}

}  // namespace
}  // namespace pipecoord::model
