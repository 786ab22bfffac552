// The pipecoord-cuda recipe against a hand count of what worker/cuda/cuda_stage_model.cc keeps
// per micro-batch (BlockState, HeadState, the embedding's ids and output gradient), in fp32 and
// in bf16; the pool bytes of one stage (each tensor rounded to 512 B) and the peaks of its F and
// B, counted by hand from the order cuda_stage_model.cc allocates and frees in.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "memory/activations.h"
#include "memory/param_states.h"
#include "memory/pipecoord_cuda.h"

namespace pipecoord::memory {
namespace {

struct Shape {
  int64_t h, f, a, s, b, v;
};

constexpr Shape kShapes[] = {
    {64, 192, 4, 40, 2, 96},  // worker/cuda's test model
    {64, 192, 4, 32, 4, 128},
    {8, 24, 2, 5, 3, 11},
    {4096, 11008, 32, 2048, 1, 32000},
};

int64_t R(int64_t bytes) { return (bytes + 511) / 512 * 512; }

std::string Name(const Shape& x, DtypePolicy p) {
  return std::string(DtypePolicyName(p)) + " h " + std::to_string(x.h) + " s " + std::to_string(x.s) + " b " +
         std::to_string(x.b);
}

TEST(PipecoordCudaRecipeTest, PerMicroBatchBytesAreTheCudaModelsTensors) {
  for (DtypePolicy p : {DtypePolicy::kFp32, DtypePolicy::kBf16}) {
    for (const Shape& x : kShapes) {
      SCOPED_TRACE(Name(x, p));
      const ModelSpec m = PipecoordCudaModel(4, x.h, x.f, x.a, x.v, x.s);
      const TrainingSpec t = PipecoordCudaTraining(static_cast<int>(x.b), p);
      ASSERT_TRUE(ValidateModel(m).ok()) << ValidateModel(m).ToString();
      ASSERT_TRUE(ValidateTraining(m, t).ok()) << ValidateTraining(m, t).ToString();
      auto am = ResolveActivations(m, t);
      ASSERT_TRUE(am.ok()) << am.status().ToString();
      const int64_t e = p == DtypePolicy::kFp32 ? 4 : 2;
      const int64_t T = x.s * x.b, h = x.h, f = x.f, a = x.a, V = x.v;
      // Block after F: x, a, q, k, v, o, x1, c (8 h) and gate, up, z (3 f) in the activation type;
      // two fp32 rstd (8 B a token) and flash attention's fp32 log-sum-exp (4 a B a token: no s x s
      // term). After B: x, a, o, x1, c, z for W, rstd twice, dy, dc, dx1, dq, dk, dv, da, dgate, dup.
      EXPECT_EQ(am->block.stored_bytes, T * (e * (8 * h + 3 * f) + 4 * a + 8));
      EXPECT_EQ(am->block.saved_bytes, am->block.stored_bytes);
      EXPECT_EQ(am->block.w_bytes, T * (e * (12 * h + 3 * f) + 8));
      // Embedding: int32 ids after F; the ids and the output gradient after B.
      EXPECT_EQ(am->first.stored_bytes, 4 * T);
      EXPECT_EQ(am->first.w_bytes, 4 * T + e * T * h);
      // Head: x, y, logits in the activation type, fp32 rstd, int32 targets after F; after B x,
      // y, dy, dlogits (in the logits' storage) and rstd. The loss is one double while F runs.
      EXPECT_EQ(am->last.stored_bytes, T * (e * (2 * h + V) + 4) + 4 * T);
      EXPECT_EQ(am->last.w_bytes, T * (e * (3 * h + V) + 4));
      EXPECT_EQ(am->last.transient_bytes, 8);
    }
  }
}

TEST(PipecoordCudaRecipeTest, ParameterStatesAre16BytesInFp32And18InBf16) {
  const StateBytes fp32 = ParamStateBytes(1000, PipecoordCudaTraining(1, DtypePolicy::kFp32));
  EXPECT_EQ(fp32.params, 4000);     // the fp32 master is what the kernels read
  EXPECT_EQ(fp32.grads, 4000);
  EXPECT_EQ(fp32.master, 0);
  EXPECT_EQ(fp32.optimizer, 8000);  // AdamW m and v
  EXPECT_EQ(fp32.total(), 16000);
  const StateBytes bf16 = ParamStateBytes(1000, PipecoordCudaTraining(1, DtypePolicy::kBf16));
  EXPECT_EQ(bf16.params, 2000);     // the bf16 copy
  EXPECT_EQ(bf16.grads, 4000);      // fp32
  EXPECT_EQ(bf16.master, 4000);
  EXPECT_EQ(bf16.grad_copy, 0);
  EXPECT_EQ(bf16.optimizer, 8000);
  EXPECT_EQ(bf16.total(), 18000);
}

TEST(PipecoordCudaRecipeTest, TensorsAreNamedAndTyped) {
  const ModelSpec m = PipecoordCudaModel(1, 8, 24, 2, 11, 5);
  for (DtypePolicy p : {DtypePolicy::kFp32, DtypePolicy::kBf16}) {
    auto am = ResolveActivations(m, PipecoordCudaTraining(1, p));
    ASSERT_TRUE(am.ok());
    EXPECT_EQ(am->recipe->name, std::string("pipecoord-cuda"));
    ASSERT_EQ(am->block.saved.size(), 14u);  // x, rstd1, a, q, k, v, lse, o, x1, rstd2, c, gate, up, z
    ASSERT_EQ(am->block.w_grads.size(), 9u);  // dy, dgate, dup, dc, dx1, dq, dk, dv, da
    for (const ResolvedTensor& t : am->block.saved) {
      SCOPED_TRACE(t.name);
      const bool fp32 = t.name == "attention_norm.rstd" || t.name == "ffn_norm.rstd" || t.name == "attention.lse";
      EXPECT_EQ(t.dtype, fp32 ? "fp32" : DtypePolicyName(p));
      EXPECT_LE(t.shape.size(), 3u);
    }
    EXPECT_EQ(am->block.saved[6].name, "attention.lse");
    EXPECT_EQ(am->block.saved[6].shape, (std::vector<int64_t>{1, 2, 5}));  // [b, a, s]
    EXPECT_EQ(am->first.tensors[0].dtype, "i32");
    EXPECT_EQ(am->last.tensors[4].dtype, "i32");
    EXPECT_EQ(am->last.tensors[3].dtype, DtypePolicyName(p));  // the logits
  }
}

// One stage in pool bytes: every tensor rounded up to 512 B on its own. H, Fb, N, L, I, Vb are
// one [T, h] activation, one [T, f], an fp32 rstd, the fp32 log-sum-exps (or delta), int32 ids
// and the logits, each rounded.
struct Pool {
  int64_t H, Fb, N, L, I, Vb;
};

Pool PoolOf(const Shape& x, int64_t e) {
  const int64_t T = x.s * x.b;
  return {R(e * T * x.h), R(e * T * x.f), R(4 * T), R(4 * x.a * T), R(4 * T), R(e * T * x.v)};
}

TEST(PipecoordCudaRecipeTest, StagePoolBytesAndOpPeaksByHand) {
  struct Stage {
    int64_t layers;
    bool embedding, head;
  };
  const Stage kStages[] = {{3, true, false}, {2, false, true}, {2, false, false}, {1, true, true}, {0, true, true}};
  for (DtypePolicy p : {DtypePolicy::kFp32, DtypePolicy::kBf16}) {
    for (const Shape& x : kShapes) {
      for (const Stage& st : kStages) {
        SCOPED_TRACE(Name(x, p) + " layers " + std::to_string(st.layers) + (st.embedding ? " +embedding" : "") +
                     (st.head ? " +head" : ""));
        const ModelSpec m = PipecoordCudaModel(4, x.h, x.f, x.a, x.v, x.s);
        const TrainingSpec t = PipecoordCudaTraining(static_cast<int>(x.b), p);
        auto got = PipecoordCudaStage(m, t, st.layers, st.embedding, st.head);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        const int64_t e = p == DtypePolicy::kFp32 ? 4 : 2;
        const Pool q = PoolOf(x, e);
        const int64_t Lr = st.layers, h = x.h, f = x.f, V = x.v;

        // Parameters: per weight tensor of n elements, master, grad, m, v (4 R(4n)), and in bf16
        // the copy R(2n).
        auto weight = [&](int64_t n) { return 4 * R(4 * n) + (e == 2 ? R(2 * n) : 0); };
        const int64_t block_params = 2 * weight(h) + 4 * weight(h * h) + 3 * weight(h * f);
        const int64_t params = Lr * block_params + (st.embedding ? weight(V * h) : 0) +
                               (st.head ? weight(h) + weight(V * h) : 0);
        EXPECT_EQ(got->parameter_bytes, params);
        const int64_t count = Lr * (4 * h * h + 3 * h * f + 2 * h) + (st.embedding ? V * h : 0) +
                              (st.head ? h + V * h : 0);
        EXPECT_EQ(got->parameters, count);
        EXPECT_EQ(got->parameter_recipe_bytes, (e == 4 ? 16 : 18) * count);
        // RoPE's two tables (s x head_dim / 2 doubles) with blocks, the loss sum with the head.
        EXPECT_EQ(got->constant_bytes, (Lr > 0 ? 2 * R(8 * x.s * (h / x.a) / 2) : 0) + (st.head ? 512 : 0));

        const int64_t stored = Lr * (8 * q.H + 3 * q.Fb + 2 * q.N + q.L) + (st.embedding ? q.I : 0) +
                               (st.head ? 2 * q.H + q.N + q.Vb + q.I : 0);
        const int64_t kept = Lr * (12 * q.H + 3 * q.Fb + 2 * q.N) + (st.embedding ? q.I + q.H : 0) +
                             (st.head ? 3 * q.H + q.N + q.Vb : 0);
        EXPECT_EQ(got->per_microbatch.stored, stored);
        EXPECT_EQ(got->per_microbatch.kept_for_w, kept);
        EXPECT_EQ(got->boundary_bytes, q.H);

        // F only allocates: its peak is its end, plus the head's loss scalar (512 B) while it
        // is added to the sum, or the output handed on.
        EXPECT_EQ(got->forward_peak, stored + (st.head ? 512 : q.H));
        // B: the head frees the targets and makes dy and its input's gradient (2H - I), or the
        // gradient arrives (H). Each block then rises by 3 Fb (dz, dgate, dup), falls to 0 once
        // dz, gate and up are gone, reaches 6H + L with dc, dx1, dout, dq, dk, dv and delta, and
        // ends at 4H - L (dout, delta, q, k, v, lse freed; da and its input's gradient made).
        // Here 4H > L, so the last block peaks highest.
        const int64_t start = st.head ? 2 * q.H - q.I : q.H;
        ASSERT_GT(4 * q.H, q.L);
        const int64_t expected_b =
            Lr == 0 ? std::max<int64_t>(start, 0)
                    : start + (Lr - 1) * (4 * q.H - q.L) + std::max(3 * q.Fb, 6 * q.H + q.L);
        EXPECT_EQ(got->backward_peak, expected_b);
      }
    }
  }
}

// ZeRO-1 and full recompute, by hand from the same order. ZeRO-1 (dp d): per tensor master and
// gradient (2 R(4n)) and two flat moment buffers of ceil(N / d) floats; in bf16 the gradient and
// the bf16 copy (R(4n) + R(2n)) and three flat buffers (the masters sharded too). Full
// recompute: F keeps each block's input only (H), rising by the block's state S = 7H + 3Fb + 2N +
// L and its output H while the block runs; B first rebuilds the block (S and the output, which
// goes at once), then runs none's backward on it, so each block ends S + 4H - L above its start.
TEST(PipecoordCudaRecipeTest, ZeroOneAndFullRecomputeByHand) {
  struct Stage {
    int64_t layers;
    bool embedding, head;
  };
  const Stage kStages[] = {{3, true, false}, {2, false, true}, {2, false, false}, {1, true, true}, {0, true, true}};
  for (DtypePolicy p : {DtypePolicy::kFp32, DtypePolicy::kBf16}) {
    for (const Shape& x : kShapes) {
      for (const Stage& st : kStages) {
        for (int dp : {2, 3}) {
          SCOPED_TRACE(Name(x, p) + " layers " + std::to_string(st.layers) + (st.embedding ? " +embedding" : "") +
                       (st.head ? " +head" : "") + " dp " + std::to_string(dp));
          const ModelSpec m = PipecoordCudaModel(4, x.h, x.f, x.a, x.v, x.s);
          const auto none = PipecoordCudaStage(m, PipecoordCudaTraining(static_cast<int>(x.b), p), st.layers,
                                               st.embedding, st.head);
          const auto got = PipecoordCudaStage(m, PipecoordCudaTraining(static_cast<int>(x.b), p, 1, dp, Recompute::kFull),
                                              st.layers, st.embedding, st.head);
          ASSERT_TRUE(none.ok() && got.ok()) << got.status().ToString();
          const int64_t e = p == DtypePolicy::kFp32 ? 4 : 2;
          const Pool q = PoolOf(x, e);
          const int64_t Lr = st.layers, h = x.h, f = x.f, V = x.v;

          auto weight = [&](int64_t n) { return e == 2 ? R(4 * n) + R(2 * n) : 2 * R(4 * n); };
          const int64_t count = Lr * (4 * h * h + 3 * h * f + 2 * h) + (st.embedding ? V * h : 0) +
                                (st.head ? h + V * h : 0);
          const int64_t shard = (count + dp - 1) / dp;
          const int64_t params = Lr * (2 * weight(h) + 4 * weight(h * h) + 3 * weight(h * f)) +
                                 (st.embedding ? weight(V * h) : 0) + (st.head ? weight(h) + weight(V * h) : 0) +
                                 (e == 2 ? 3 : 2) * R(4 * shard);
          EXPECT_EQ(got->parameter_bytes, params);

          const int64_t extras = (st.embedding ? q.I : 0) + (st.head ? 2 * q.H + q.N + q.Vb + q.I : 0);
          EXPECT_EQ(got->per_microbatch.stored, Lr * q.H + extras);
          EXPECT_EQ(got->per_microbatch.kept_for_w, none->per_microbatch.kept_for_w) << "W needs what it needed";
          const int64_t S = 7 * q.H + 3 * q.Fb + 2 * q.N + q.L;
          const int64_t start_f = q.H + (st.embedding ? q.I : 0);
          const int64_t end_f = got->per_microbatch.stored + (st.head ? 512 : q.H);
          EXPECT_EQ(got->forward_peak, std::max(Lr > 0 ? start_f + Lr * q.H + S : 0, end_f));
          const int64_t start_b = st.head ? 2 * q.H - q.I : q.H;
          const int64_t expected_b = Lr == 0 ? std::max<int64_t>(start_b, 0)
                                             : start_b + (Lr - 1) * (S + 4 * q.H - q.L) + S +
                                                   std::max(3 * q.Fb, 6 * q.H + q.L);
          EXPECT_EQ(got->backward_peak, expected_b);
        }
      }
    }
  }
}

// worker/cuda's test model (h 64, 4 heads, V 96, s 40, b 2): the figures the host-emulated run
// (//worker/cuda:memory_budget_cuda_test_host) measures on the caching pool.
TEST(PipecoordCudaRecipeTest, TheTestModelsStagesInFigures) {
  const ModelSpec m = PipecoordCudaModel(2, 64, 192, 4, 96, 40);
  auto fp32 = PipecoordCudaStage(m, PipecoordCudaTraining(2, DtypePolicy::kFp32), 1, true, false);
  ASSERT_TRUE(fp32.ok());
  // T = 80: H = 20480, Fb = 61440, N = I = 512, L = 1536.
  EXPECT_EQ(fp32->per_microbatch.stored, 8 * 20480 + 3 * 61440 + 2 * 512 + 1536 + 512);  // 351232
  EXPECT_EQ(fp32->per_microbatch.kept_for_w, 12 * 20480 + 3 * 61440 + 2 * 512 + 512 + 20480);
  EXPECT_EQ(fp32->backward_peak, 20480 + 3 * 61440);  // dz, dgate, dup over 6H + L = 124416
  auto bf16 = PipecoordCudaStage(m, PipecoordCudaTraining(2, DtypePolicy::kBf16), 1, false, true);
  ASSERT_TRUE(bf16.ok());
  // T = 80: H = 10240, Fb = 30720, Vb = 15360: the head frees 512 of targets and adds 2H.
  EXPECT_EQ(bf16->per_microbatch.stored,
            8 * 10240 + 3 * 30720 + 2 * 512 + 1536 + 2 * 10240 + 512 + 15360 + 512);
  EXPECT_EQ(bf16->backward_peak, 2 * 10240 - 512 + 3 * 30720);  // 3 Fb over 6H + L = 62976
}

}  // namespace
}  // namespace pipecoord::memory
