// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models":
// Table 2 (activation bytes per transformer layer) and equation 5 plus section 4.3's extras,
// for their GPT 22B configuration (h 6144, a 64, L 48, s 2048, b 4, t 8), exactly, from the
// `megatron` recipe (eager attention, LayerNorm, GeLU, dropout: the paper's block).
#include <gtest/gtest.h>

#include "memory/activations.h"
#include "memory/estimate.h"
#include "memory/presets.h"

namespace pipecoord::memory {
namespace {

constexpr int64_t s = 2048, b = 4, h = 6144, a = 64, L = 48, t = 8, v = 51200;
constexpr int64_t sbh = s * b * h;
constexpr int64_t attn = 5 * a * s * s * b;  // the 5as/h term times sbh: 5as^2b

ModelSpec Gpt22b() {
  auto m = FindModelPreset("gpt3-22b");
  EXPECT_TRUE(m.ok());
  EXPECT_EQ(m->hidden, h);
  EXPECT_EQ(m->heads, a);
  EXPECT_EQ(m->layers, L);
  EXPECT_EQ(m->seq_len, s);
  return *m;
}

TrainingSpec Spec(int tp, bool sp, Recompute rc) {
  TrainingSpec ts;
  ts.micro_batch = b;
  ts.tp = tp;
  ts.sp = sp;
  ts.recompute = rc;
  ts.dtype = DtypePolicy::kBf16;
  return ts;
}

BlockActivations Block(int tp, bool sp, Recompute rc) {
  auto am = ResolveActivations(Gpt22b(), Spec(tp, sp, rc));
  EXPECT_TRUE(am.ok()) << am.status().ToString();
  return am.ok() ? am->block : BlockActivations{};
}

TEST(KorthikantiTable2, NoParallelism) {
  // sbh(34 + 5as/h)
  EXPECT_EQ(Block(1, false, Recompute::kNone).stored_bytes, 34 * sbh + attn);
}

TEST(KorthikantiTable2, TensorParallel) {
  // sbh(10 + 24/t + 5as/(ht))
  EXPECT_EQ(Block(t, false, Recompute::kNone).stored_bytes, 10 * sbh + 24 * sbh / t + attn / t);
}

TEST(KorthikantiTable2, TensorAndSequenceParallel) {
  // sbh(34/t + 5as/(ht))
  EXPECT_EQ(Block(t, true, Recompute::kNone).stored_bytes, 34 * sbh / t + attn / t);
}

TEST(KorthikantiTable2, TensorParallelSelectiveRecompute) {
  // sbh(10 + 24/t)
  EXPECT_EQ(Block(t, false, Recompute::kSelective).stored_bytes, 10 * sbh + 24 * sbh / t);
}

TEST(KorthikantiTable2, TensorSequenceParallelSelectiveRecompute) {
  // sbh(34/t)
  BlockActivations blk = Block(t, true, Recompute::kSelective);
  EXPECT_EQ(blk.stored_bytes, 34 * sbh / t);
  EXPECT_EQ(blk.recompute_bytes, attn / t);  // rebuilt while the block's backward runs
}

TEST(KorthikantiTable2, FullRecompute) {
  // 2sbh: only the block input stays (replicated over TP without sequence parallelism).
  EXPECT_EQ(Block(t, false, Recompute::kFull).stored_bytes, 2 * sbh);
  EXPECT_EQ(Block(1, false, Recompute::kFull).stored_bytes, 2 * sbh);
  // With sequence parallelism the input is split along s too.
  EXPECT_EQ(Block(t, true, Recompute::kFull).stored_bytes, 2 * sbh / t);
}

TEST(KorthikantiTable2, ComponentsOfTheNoParallelismBlock) {
  // Section 4.1: attention block 11sbh + 5as^2b, MLP 19sbh, two layer norms 4sbh.
  BlockActivations blk = Block(1, false, Recompute::kNone);
  int64_t attention = 0, mlp = 0, norms = 0, dropout = 0;
  for (const ResolvedTensor& x : blk.saved) {
    if (x.group == "attention") attention += x.bytes;
    if (x.group == "mlp") mlp += x.bytes;
    if (x.group == "input_norm" || x.group == "post_attention_norm") norms += x.bytes;
    if (x.group == "dropout_add") dropout += x.bytes;
  }
  // Our groups put each dropout mask in "dropout_add" (one sbh after attention, one after MLP).
  EXPECT_EQ(attention + sbh, 11 * sbh + attn);
  EXPECT_EQ(mlp + sbh, 19 * sbh);
  EXPECT_EQ(norms, 4 * sbh);
  EXPECT_EQ(dropout, 2 * sbh);
}

TEST(KorthikantiEquation5, FirstStageHoldsAllLayersUnder1F1B) {
  // First pipeline stage under 1F1B: p micro-batches of L/p layers = sbhL/t x 34 with TP, SP and
  // selective recompute (equation 6), plus the embedding dropout masks sbhp/t (section 4.3).
  for (int p : {1, 2, 4, 8}) {
    TrainingSpec ts = Spec(t, true, Recompute::kSelective);
    ts.pp = p;
    ts.microbatches = 16;
    ts.schedule = "1f1b";
    auto rep = EstimateMemory(Gpt22b(), ts);
    ASSERT_TRUE(rep.ok()) << rep.status().ToString();
    int64_t expected = 34 * sbh * L / t + sbh * p / t;
    if (p == 1) expected += 4 * sbh / t + 4 * s * b * v / t;  // final norm, LM head, fp32 logits
    EXPECT_EQ(rep->ranks[0].activations_bytes, expected) << "p=" << p;
    EXPECT_EQ(rep->ranks[0].live_microbatches, p);
  }
}

TEST(KorthikantiSection43, OutputLayerExtras) {
  // 4sbh/t (1 + v/h): final norm input 2sbh/t, LM-head input 2sbh/t, fp32 logits 4sbv/t.
  auto am = ResolveActivations(Gpt22b(), Spec(t, true, Recompute::kSelective));
  ASSERT_TRUE(am.ok());
  EXPECT_EQ(am->last.stored_bytes, 4 * sbh / t + 4 * s * b * v / t);
  EXPECT_EQ(am->first.stored_bytes, sbh / t);  // the embedding dropout mask
}

TEST(ZeroBubbleWShare, ThirtyTwoSbhSurviveBUntilW) {
  // Qi et al. 2024: of one layer's sbh(34 + 5as/h), 32sbh stay from B until W: the inputs of
  // the four linear layers (2 + 2 + 2 + 8 sbh) and the gradients of their outputs
  // (6 + 2 + 8 + 2 sbh).
  BlockActivations blk = Block(1, false, Recompute::kNone);
  EXPECT_EQ(blk.w_bytes, 32 * sbh);
}

}  // namespace
}  // namespace pipecoord::memory
