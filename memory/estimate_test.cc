#include "memory/estimate.h"

#include <gtest/gtest.h>

#include "memory/live_peak.h"
#include "memory/param_states.h"
#include "memory/presets.h"
#include "schedules/cost_model.h"
#include "schedules/registry.h"
#include "schedules/simulator.h"

namespace pipecoord::memory {
namespace {

ModelSpec Preset(const char* name) {
  auto m = FindModelPreset(name);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return *m;
}

TrainingSpec Pipeline(int pp, int m, const char* schedule) {
  TrainingSpec t;
  t.pp = pp;
  t.microbatches = m;
  t.schedule = schedule;
  return t;
}

TEST(PresetParamsTest, PublishedCounts) {
  EXPECT_EQ(TotalParams(Preset("llama2-7b")), 6'738'415'616);
  EXPECT_EQ(TotalParams(Preset("llama2-13b")), 13'015'864'320);
  EXPECT_EQ(TotalParams(Preset("llama2-70b")), 68'976'648'192);
  EXPECT_EQ(TotalParams(Preset("llama3-8b")), 8'030'261'248);
  EXPECT_EQ(TotalParams(Preset("llama3-70b")), 70'553'706'496);
}

TEST(EstimateTest, OneFOneBRankRHoldsPMinusRMicrobatches) {
  const ModelSpec m = Preset("llama2-7b");
  auto rep = EstimateMemory(m, Pipeline(4, 8, "1f1b"));
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  const BlockActivations& blk = rep->activations.block;
  for (int r = 0; r < 4; ++r) {
    const RankMemory& rm = rep->ranks[r];
    EXPECT_EQ(rm.layers, 8);
    EXPECT_EQ(rm.live_microbatches, 4 - r);
    int64_t per_mb = 8 * blk.stored_bytes;
    if (r == 0) per_mb += rep->activations.first.stored_bytes;
    if (r == 3) per_mb += rep->activations.last.stored_bytes;
    EXPECT_EQ(rm.activations_bytes, (4 - r) * per_mb) << "rank " << r;
    EXPECT_EQ(rm.peak_bytes, rm.states.total() + rm.activations_bytes + rm.transient_bytes);
  }
  EXPECT_TRUE(rep->ranks[0].first_stage);
  EXPECT_TRUE(rep->ranks[3].last_stage);
  // Untied: the embedding on rank 0, the LM head and final norm on rank 3.
  const ParamCounts pc = CountParams(m, 1);
  EXPECT_EQ(rep->ranks[0].params, 8 * pc.per_block + pc.embedding);
  EXPECT_EQ(rep->ranks[3].params, 8 * pc.per_block + pc.final_norm + pc.lm_head);
  // The loss's bf16 logits are alive while it runs, on the last rank only.
  EXPECT_EQ(rep->ranks[3].transient_bytes, rep->activations.last.transient_bytes);
  EXPECT_EQ(rep->ranks[0].transient_bytes, 0);
}

TEST(EstimateTest, FThenBHoldsEveryMicrobatch) {
  auto rep = EstimateMemory(Preset("llama2-7b"), Pipeline(2, 6, "fthenb"));
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->ranks[0].live_microbatches, 6);
  EXPECT_EQ(rep->ranks[1].live_microbatches, 6);
}

TEST(EstimateTest, TiedHeadIsCopiedOnlyWhenOnAnotherRank) {
  ModelSpec m = Preset("gpt3-22b");
  const ParamCounts pc = CountParams(m, 1);
  auto one = EstimateMemory(m, Pipeline(1, 1, "1f1b"));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->ranks[0].params, TotalParams(m));
  auto two = EstimateMemory(m, Pipeline(2, 2, "1f1b"));
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->ranks[0].params + two->ranks[1].params, TotalParams(m) + pc.lm_head);
}

TEST(EstimateTest, InterleavedMatchesTheEnginesPeakActivations) {
  // Equal stages and no B/W split: our byte walk is the engine's unit walk times the bytes.
  const ModelSpec m = Preset("llama2-7b");
  TrainingSpec t = Pipeline(4, 8, "interleaved");
  t.vpp = 2;
  auto rep = EstimateMemory(m, t);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  schedules::ScheduleSpec spec;
  spec.pp = 4;
  spec.vpp = 2;
  spec.microbatches = 8;
  auto s = schedules::GenerateComputeOrder("interleaved", spec);
  ASSERT_TRUE(s.ok());
  std::vector<double> units = schedules::PeakActivations(*s, schedules::ResolveCosts({}, *s));
  const int64_t stage = 4 * rep->activations.block.stored_bytes;  // 32 layers / 8 stages
  for (int r = 1; r < 3; ++r) {  // ranks without the embedding or the head
    EXPECT_EQ(rep->ranks[r].activations_bytes, static_cast<int64_t>(units[r] * 2 * stage + 0.5));
  }
}

TEST(EstimateTest, ZeroBubbleH1CountsWhatBKeepsUntilW) {
  // GPT 22B, t = 1: a block stores S = sbh(34 + 5as/h) and keeps W = 32sbh from B until W
  // (Qi et al. 2024). ZB-H1 delays W: rank r peaks at (p - r) stored micro-batches plus r
  // awaiting W, and rank 0 at 1F1B's p micro-batches.
  const ModelSpec m = Preset("gpt3-22b");
  TrainingSpec t = Pipeline(4, 8, "zbh1");
  auto rep = EstimateMemory(m, t);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_TRUE(rep->split_backward);
  const int64_t sbh = 2048 * 6144, S = sbh * 34 + 5 * 64 * 2048 * 2048, W = 32 * sbh;
  EXPECT_EQ(rep->activations.block.stored_bytes, S);
  EXPECT_EQ(rep->activations.block.w_bytes, W);
  const int64_t stage_s = 12 * S, stage_w = 12 * W;
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(rep->ranks[r].activations_bytes, (4 - r) * stage_s + r * stage_w) << "rank " << r;
  }
  auto one = EstimateMemory(m, Pipeline(4, 8, "1f1b"));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(rep->ranks[0].activations_bytes, one->ranks[0].activations_bytes);
  // The engine's own walk with w_share = W / S agrees (in units of a rank's share).
  schedules::ScheduleSpec spec;
  spec.pp = 4;
  spec.microbatches = 8;
  auto s = schedules::GenerateComputeOrder("zbh1", spec);
  ASSERT_TRUE(s.ok());
  schedules::CostModel cm;
  cm.w_share = static_cast<double>(W) / S;
  std::vector<double> units = schedules::PeakActivations(*s, schedules::ResolveCosts(cm, *s));
  for (int r = 1; r < 3; ++r) {
    EXPECT_NEAR(units[r] * stage_s, static_cast<double>(rep->ranks[r].activations_bytes), 1.0) << "rank " << r;
  }
}

TEST(LivePeakTest, SplitBackwardKeepsWhatWNeeds) {
  schedules::Schedule s = schedules::MakeSchedule("hand", 1, 1, 2, {0});
  using schedules::Op;
  s.ranks[0] = {{Op::kF, 0, 0}, {Op::kF, 0, 1}, {Op::kB, 0, 0}, {Op::kB, 0, 1}, {Op::kW, 0, 0}, {Op::kW, 0, 1}};
  auto peaks = PeakLiveActivations(s, {{10, 4}});
  EXPECT_EQ(peaks[0].bytes, 20);
  EXPECT_EQ(peaks[0].live_microbatches, 2);
  EXPECT_EQ(peaks[0].action_index, 1);
  // Full recompute: B rebuilds more than F stored and keeps it until W.
  peaks = PeakLiveActivations(s, {{10, 30}});
  EXPECT_EQ(peaks[0].bytes, 60);
  EXPECT_EQ(peaks[0].action_index, 3);
  // The engine's unit walk agrees where the share is a fraction: 4/10 kept.
  schedules::StageCosts c;
  c.activation = {10};
  c.w_share = 0.4;
  EXPECT_DOUBLE_EQ(schedules::PeakActivations(s, c)[0], 20);
}

TEST(EstimateTest, ZeroThreeAddsOneGatheredBlock) {
  const ModelSpec m = Preset("llama2-7b");
  TrainingSpec t = Pipeline(1, 1, "1f1b");
  t.zero = 3;
  t.dp = 8;
  auto rep = EstimateMemory(m, t);
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->ranks[0].transient_bytes, rep->activations.last.transient_bytes +
                                               CountParams(m, 1).per_block * (2 + 4));
}

TEST(EstimateTest, RulesAreNamed) {
  ModelSpec m = Preset("llama2-7b");
  TrainingSpec t;
  t.tp = 3;
  EXPECT_EQ(EstimateMemory(m, t).status().message(), "tp: must divide heads (32 % 3 != 0)");
  t.tp = 64;
  EXPECT_EQ(EstimateMemory(m, t).status().message(), "tp: must divide heads (32 % 64 != 0)");
  ModelSpec l3 = Preset("llama3-8b");
  t.tp = 16;
  EXPECT_EQ(EstimateMemory(l3, t).status().message(), "tp: must divide kv-heads (8 % 16 != 0)");
  t = TrainingSpec{};
  t.tp = 32;
  EXPECT_EQ(EstimateMemory(l3, t).status().message(), "tp: must divide kv-heads (8 % 32 != 0)");
  t = TrainingSpec{};
  t.pp = 40;
  EXPECT_EQ(EstimateMemory(m, t).status().message(),
            "layers: every pipeline chunk needs at least one block, so layers (32) must be >= pp x vpp (40)");
  t = TrainingSpec{};
  t.schedule = "nope";
  auto bad = EstimateMemory(m, t);
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("schedule: unknown name \"nope\""), std::string::npos);
  t = TrainingSpec{};
  t.recipe = "nope";
  EXPECT_EQ(EstimateMemory(m, t).status().code(), Code::kNotFound);
  m.heads = 30;
  EXPECT_EQ(EstimateMemory(m, TrainingSpec{}).status().message(), "heads: must divide hidden (4096 % 30 != 0)");
  m = Preset("llama2-7b");
  m.kv_heads = 5;
  EXPECT_EQ(ValidateModel(m).message(), "kv-heads: must divide heads (32 % 5 != 0)");
}

}  // namespace
}  // namespace pipecoord::memory
