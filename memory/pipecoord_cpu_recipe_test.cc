// The pipecoord-cpu recipe resolves to exactly the bytes the CPU StageModel keeps per
// micro-batch (worker/model: BlockSaved, HeadSaved, the embedding's ids and gradient), and its
// parameter states are 16 bytes per parameter.
#include <gtest/gtest.h>

#include "memory/activations.h"
#include "memory/estimate.h"
#include "memory/param_states.h"
#include "memory/pipecoord_cpu.h"

namespace pipecoord::memory {
namespace {

struct Shape {
  int64_t h, f, a, s, b, v;
};

constexpr Shape kShapes[] = {
    {64, 172, 4, 32, 2, 256},
    {128, 352, 8, 16, 1, 1000},
    {8, 24, 2, 5, 3, 11},
    {4096, 11008, 32, 2048, 2, 32000},
};

TEST(PipecoordCpuRecipeTest, PerMicroBatchBytesAreTheCpuBackendsFormulas) {
  for (const Shape& x : kShapes) {
    const ModelSpec m = PipecoordCpuModel(4, x.h, x.f, x.a, x.v, x.s);
    const TrainingSpec t = PipecoordCpuTraining(static_cast<int>(x.b));
    ASSERT_TRUE(ValidateModel(m).ok()) << ValidateModel(m).ToString();
    ASSERT_TRUE(ValidateTraining(m, t).ok()) << ValidateTraining(m, t).ToString();
    auto am = ResolveActivations(m, t);
    ASSERT_TRUE(am.ok()) << am.status().ToString();
    const int64_t T = x.s * x.b, h = x.h, f = x.f, a = x.a, s = x.s, V = x.v;
    SCOPED_TRACE("h " + std::to_string(h) + " s " + std::to_string(s));
    // Block: after F T (8h + 3f + a s + 2) floats, after B T (12h + 3f + 2).
    EXPECT_EQ(am->block.stored_bytes, T * (8 * h + 3 * f + a * s + 2) * 4);
    EXPECT_EQ(am->block.saved_bytes, am->block.stored_bytes);
    EXPECT_EQ(am->block.w_bytes, T * (12 * h + 3 * f + 2) * 4);
    // Embedding: after F T int32 ids; after B the ids and T h floats.
    EXPECT_EQ(am->first.stored_bytes, T * 4);
    EXPECT_EQ(am->first.w_bytes, T * 4 + T * h * 4);
    // Head: after F T (2h + 1 + V) floats + T int32 targets; after B T (3h + 1 + V) floats.
    EXPECT_EQ(am->last.stored_bytes, T * (2 * h + 1 + V) * 4 + T * 4);
    EXPECT_EQ(am->last.w_bytes, T * (3 * h + 1 + V) * 4);
    EXPECT_EQ(am->last.transient_bytes, 0);

    // A stage with 3 blocks, the embedding and the head.
    const CpuStageMemory st = PipecoordCpuStage(m, t, *am, 3, true, true);
    EXPECT_EQ(st.parameters, 3 * (4 * h * h + 3 * h * f + 2 * h) + V * h + h + V * h);
    EXPECT_EQ(st.parameter_bytes, 16 * st.parameters);
    EXPECT_EQ(st.per_microbatch.stored,
              3 * T * (8 * h + 3 * f + a * s + 2) * 4 + T * 4 + T * (2 * h + 1 + V) * 4 + T * 4);
    EXPECT_EQ(st.per_microbatch.kept_for_w,
              3 * T * (12 * h + 3 * f + 2) * 4 + T * 4 + T * h * 4 + T * (3 * h + 1 + V) * 4);
  }
}

TEST(PipecoordCpuRecipeTest, ParameterStatesAreFp32ValuesGradsAndTwoMoments) {
  const TrainingSpec t = PipecoordCpuTraining(1);
  const StateBytes sb = ParamStateBytes(1000, t);
  EXPECT_EQ(sb.params, 4000);
  EXPECT_EQ(sb.grads, 4000);
  EXPECT_EQ(sb.master, 0);
  EXPECT_EQ(sb.grad_copy, 0);
  EXPECT_EQ(sb.optimizer, 8000);
  EXPECT_EQ(sb.total(), 16000);
}

TEST(PipecoordCpuRecipeTest, TensorsAreNamedAndTyped) {
  const ModelSpec m = PipecoordCpuModel(1, 8, 24, 2, 11, 5);
  auto am = ResolveActivations(m, PipecoordCpuTraining(1));
  ASSERT_TRUE(am.ok());
  EXPECT_EQ(am->recipe->name, std::string("pipecoord-cpu"));
  ASSERT_EQ(am->block.saved.size(), 14u);  // BlockSaved's x, rstd1, a, q, k, v, probs, o, x1, rstd2, c, gate, up, z
  ASSERT_EQ(am->block.w_grads.size(), 9u);  // dy, dgate, dup, dc, dx1, dq, dk, dv, da
  EXPECT_EQ(am->first.tensors[0].dtype, "i32");
  EXPECT_EQ(am->block.saved[0].dtype, "fp32");
}

// docs/memory.md's figures for `pipectl memory --recipe pipecoord-cpu` on the demo model (h 64,
// 4 heads, v 128, s 32, b 4, 8 layers). ZB-H1 (one stage per rank, split B and W) gives the
// budgets and measured peaks of worker/daemon/memory_budget_run_test; 1F1B's fused BW and
// interleaved's chunks give less than the budget (jobplan notes BW after its B half and sums
// per-stage peaks).
TEST(PipecoordCpuRecipeTest, AnalyticPeaksOfTheDemoModel) {
  const ModelSpec m = PipecoordCpuModel(8, 64, 192, 4, 128, 32);
  auto peaks = [&](int pp, int vpp, int mb, const char* schedule) {
    TrainingSpec t = PipecoordCpuTraining(4);
    t.pp = pp;
    t.vpp = vpp;
    t.microbatches = mb;
    t.schedule = schedule;
    auto rep = EstimateMemory(m, t);
    EXPECT_TRUE(rep.ok()) << rep.status().ToString();
    std::vector<int64_t> out;
    if (rep.ok()) {
      for (const RankMemory& r : rep->ranks) out.push_back(r.peak_bytes);
    }
    return out;
  };
  EXPECT_EQ(peaks(4, 0, 8, "zbh1"), (std::vector<int64_t>{6993920, 6959104, 7090176, 8010752}));
  EXPECT_EQ(peaks(4, 0, 8, "1f1b")[0], 6830080);         // budget 6993920
  EXPECT_EQ(peaks(2, 2, 4, "interleaved")[0], 9785344);  // budget 11327488
}

// The op replay (PipecoordCpuOpPeaks) leaves what the recipe says F stores and B keeps, plus the
// output, for every stage kind, tp, sequence parallelism and recompute mode; one peak by hand.
// worker/daemon:memory_budget_run_test holds the peaks themselves to the CPU backend's allocator.
TEST(PipecoordCpuRecipeTest, OpReplayLeavesWhatTheRecipeKeeps) {
  for (const Shape& x : kShapes) {
    for (int tp : {1, 2}) {
      for (bool sp : {false, true}) {
        if (sp && tp == 1) continue;
        for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
          const ModelSpec m = PipecoordCpuModel(4, x.h, x.f, x.a, x.v, x.s);
          const TrainingSpec t = PipecoordCpuTraining(static_cast<int>(x.b), tp, 0, 1, r, sp);
          // What jobplan's ValidateTensorParallel lets through: tp divides heads, ffn, vocab, seq.
          if (x.a % tp || x.f % tp || x.v % tp || (sp && x.s % tp) || !ValidateTraining(m, t).ok()) continue;
          auto am = ResolveActivations(m, t);
          ASSERT_TRUE(am.ok()) << am.status().ToString();
          for (const auto& [emb, head] : {std::pair{true, false}, std::pair{false, false}, std::pair{false, true},
                                          std::pair{true, true}}) {
            SCOPED_TRACE("h " + std::to_string(x.h) + " tp " + std::to_string(tp) + (sp ? "+sp" : "") +
                         " recompute " + std::to_string(static_cast<int>(r)) + " emb " + std::to_string(emb) +
                         " head " + std::to_string(head));
            const CpuStageMemory st = PipecoordCpuStage(m, t, *am, 3, emb, head);
            auto ops = PipecoordCpuOpPeaks(m, t, 3, emb, head);
            ASSERT_TRUE(ops.ok()) << ops.status().ToString();
            const int64_t f_out = head ? 0 : ops->boundary, b_out = emb ? 0 : ops->boundary;
            EXPECT_EQ(ops->forward_end, st.per_microbatch.stored + f_out);
            EXPECT_EQ(ops->backward_end, st.per_microbatch.kept_for_w - st.per_microbatch.stored + b_out);
            EXPECT_GE(ops->forward, ops->forward_end);
            EXPECT_GE(ops->backward, ops->backward_end);
            EXPECT_GE(ops->weight, 0);
            EXPECT_GT(ops->replay, 0);
            if (!sp) {
              EXPECT_EQ(ops->weight, 0);  // W only frees
            }
          }
        }
      }
    }
  }
  // By hand, the smallest shape (h 8, f 24, a 2, s 5, b 3: T 15), a middle stage of 3 blocks, tp
  // 1, no recompute: B takes the gradient (T h floats); each block's B leaves 4h - a s floats a
  // token more (dc, dx1, da and its output dx, less the probabilities: kept - stored, 12h + 3f + 2
  // - (8h + 3f + a s + 2)); the third block peaks with dz, dgate and dup (3f) at once.
  const ModelSpec m = PipecoordCpuModel(3, 8, 24, 2, 11, 5);
  const TrainingSpec t = PipecoordCpuTraining(3);
  auto ops = PipecoordCpuOpPeaks(m, t, 3, false, false);
  ASSERT_TRUE(ops.ok());
  const int64_t T = 15;
  EXPECT_EQ(ops->backward, 4 * T * (8 + 2 * (4 * 8 - 2 * 5) + 3 * 24));
}

}  // namespace
}  // namespace pipecoord::memory
