// Megatron-LM tools/get_training_info (README, "Example of output"): GPT with h 4096, 32 heads,
// s 2048, micro-batch 4, SwiGLU FFN 10880, flash attention, bf16, dropout on, vocabulary 50432,
// learned positions, tied embeddings, biases; TP2 PP2 DP4 with the distributed optimizer.
// The README's "MB" and "GB" are 2^20 and 2^30 bytes (its code divides by 1024^2 and 1024^3),
// which is what makes its figures exact.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "memory/activations.h"
#include "memory/estimate.h"
#include "memory/param_states.h"
#include "memory/units.h"

namespace pipecoord::memory {
namespace {

ModelSpec ReadmeModel() {
  ModelSpec m;
  m.name = "get_training_info example";
  m.layers = 32;
  m.hidden = 4096;
  m.ffn = 10880;
  m.heads = 32;
  m.kv_heads = 32;
  m.vocab = 50432;
  m.seq_len = 2048;
  m.tied_embeddings = true;
  m.norm = Norm::kLayerNorm;
  m.mlp = Mlp::kSwiGlu;
  m.attention = Attention::kFlash;
  m.linear_bias = true;
  m.dropout = true;
  m.learned_positions = 2048;
  return m;
}

TrainingSpec ReadmeTraining() {
  TrainingSpec t;
  t.micro_batch = 4;
  t.microbatches = 32;  // global batch 512 / (micro-batch 4 x dp 4)
  t.dtype = DtypePolicy::kBf16;
  t.optimizer = Optimizer::kAdamW;
  t.zero = 1;  // --use-distributed-optimizer
  t.dp = 4;
  t.tp = 2;
  t.pp = 2;
  t.schedule = "1f1b";
  return t;
}

double Tenth(double x) { return std::round(x * 10) / 10; }

TEST(MegatronReadme, PerLayerActivations1320MiB) {
  TrainingSpec t = ReadmeTraining();
  t.tp = 1;  // the README's "Full Model without Parallel" table
  auto am = ResolveActivations(ReadmeModel(), t);
  ASSERT_TRUE(am.ok()) << am.status().ToString();
  EXPECT_EQ(am->block.saved_bytes, 1320 * kMiB);
  std::map<std::string, int64_t> g;
  for (const ResolvedTensor& x : am->block.saved) g[x.group] += x.bytes;
  EXPECT_EQ(g["input_norm"], 64 * kMiB);
  EXPECT_EQ(g["attention"], 384 * kMiB);
  EXPECT_EQ(g["post_attention_norm"], 64 * kMiB);
  EXPECT_EQ(g["mlp"], 744 * kMiB);
  // Two 1-byte dropout masks of sbh. The README prints 96 MB (1.5sbh) on its drop_add_fusion
  // line but counts 64 MB in its own per-layer total (10sbh + 4sbf = 1320 MB); see
  // docs/memory.md.
  EXPECT_EQ(g["dropout_add"], 64 * kMiB);
  EXPECT_EQ(g.size(), 5u);
}

TEST(MegatronReadme, PerLayerTensorsInTheReadmesRows) {
  TrainingSpec t = ReadmeTraining();
  t.tp = 1;
  auto am = ResolveActivations(ReadmeModel(), t);
  ASSERT_TRUE(am.ok());
  std::map<std::string, int64_t> n;
  for (const ResolvedTensor& x : am->block.saved) n[x.name] = x.bytes;
  // rearrange (q, k, v) 192 MB, core_attention_flash 64 MB, bias_glue 680 MB.
  EXPECT_EQ(n["attention.q"] + n["attention.k"] + n["attention.v"], 192 * kMiB);
  EXPECT_EQ(n["attention.flash_output"], 64 * kMiB);
  EXPECT_EQ(n["mlp.fc1_output"] + n["mlp.silu_output"] + n["mlp.fc2_input"], 680 * kMiB);
}

TEST(MegatronReadme, PerGpuParamsGradsOptimizerTp2Pp2Dp4) {
  auto rep = EstimateMemory(ReadmeModel(), ReadmeTraining());
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  const RankMemory& r0 = rep->ranks[0];
  // Our count: biases of column-parallel layers split over TP, the rest replicated. The README
  // prints 1,718,898,688, because it does not split the QKV and fc1 biases (16 x 8832 more).
  EXPECT_EQ(r0.params, 1'718'757'376);
  EXPECT_EQ(r0.states.params, 2 * r0.params);
  EXPECT_EQ(r0.states.grads, 4 * r0.params);
  EXPECT_EQ(r0.states.optimizer_side(), 3 * r0.params);  // 12 bytes / dp 4
  EXPECT_DOUBLE_EQ(Tenth(static_cast<double>(r0.states.params) / kGiB), 3.2);
  EXPECT_DOUBLE_EQ(Tenth(static_cast<double>(r0.states.grads) / kGiB), 6.4);
  EXPECT_DOUBLE_EQ(Tenth(static_cast<double>(r0.states.optimizer_side()) / kGiB), 4.8);
}

TEST(MegatronBytesPerParameter, EighteenAndSixPlusTwelveOverD) {
  const int64_t n = 1 << 20;  // divisible by every dp below, so shards are exact
  TrainingSpec t;
  t.dtype = DtypePolicy::kBf16;
  t.optimizer = Optimizer::kAdamW;
  t.zero = 0;
  EXPECT_EQ(ParamStateBytes(n, t).total(), 18 * n);
  for (int d : {1, 2, 4, 8, 16, 64}) {
    t.zero = 1;
    t.dp = d;
    EXPECT_EQ(ParamStateBytes(n, t).total(), 6 * n + 12 * n / d) << "d=" << d;
  }
  // The other stages and policies, for completeness: ZeRO-2 shards the fp32 gradients, ZeRO-3
  // the bf16 weights too; fp32 training has no master copy; SGD keeps one momentum.
  t.dp = 8;
  t.zero = 2;
  EXPECT_EQ(ParamStateBytes(n, t).total(), 2 * n + 16 * n / 8);
  t.zero = 3;
  EXPECT_EQ(ParamStateBytes(n, t).total(), 18 * n / 8);
  t.zero = 0;
  t.dtype = DtypePolicy::kFp32;
  EXPECT_EQ(ParamStateBytes(n, t).total(), 16 * n);
  t.optimizer = Optimizer::kSgd;
  EXPECT_EQ(ParamStateBytes(n, t).total(), 12 * n);
}

TEST(MegatronBytesPerParameter, TheDistributedOptimizerTable) {
  // Megatron Core's distributed optimizer guide: bytes per parameter without / with it.
  const int64_t n = 1 << 20;
  TrainingSpec t;
  t.optimizer = Optimizer::kAdamW;
  struct Row {
    DtypePolicy dtype;
    bool fp32_grads;
    int64_t plain, fixed, sharded;  // plain; fixed + sharded / d
  };
  for (const Row& row : {Row{DtypePolicy::kFp16, false, 20, 4, 16}, Row{DtypePolicy::kBf16, true, 18, 6, 12},
                         Row{DtypePolicy::kFp32, true, 16, 8, 8}}) {
    t.dtype = row.dtype;
    t.fp32_grads = row.fp32_grads;
    t.zero = 0;
    t.dp = 1;
    EXPECT_EQ(ParamStateBytes(n, t).total(), row.plain * n);
    t.zero = 1;
    for (int d : {2, 4, 8, 64}) {
      t.dp = d;
      EXPECT_EQ(ParamStateBytes(n, t).total(), row.fixed * n + row.sharded * n / d) << "d=" << d;
    }
  }
}

}  // namespace
}  // namespace pipecoord::memory
