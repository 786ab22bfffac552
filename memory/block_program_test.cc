// Both estimators on the same block: what the liveness simulator sees alive between the
// programs equals what the analytic recipe says a block keeps, up to the small per-token
// tensors the recipe leaves out (the norms' statistics, flash attention's log-sum-exp).
#include "memory/block_program.h"

#include <gtest/gtest.h>

#include "memory/activations.h"
#include "memory/liveness.h"
#include "memory/presets.h"
#include "memory/program_json.h"

namespace pipecoord::memory {
namespace {

ModelSpec ReadmeModel() {  // Megatron get_training_info's example (see megatron_readme_test)
  ModelSpec m;
  m.name = "readme";
  m.layers = 32;
  m.hidden = 4096;
  m.ffn = 10880;
  m.heads = 32;
  m.kv_heads = 32;
  m.vocab = 50432;
  m.seq_len = 2048;
  m.norm = Norm::kLayerNorm;
  m.mlp = Mlp::kSwiGlu;
  m.attention = Attention::kFlash;
  m.linear_bias = true;
  m.dropout = true;
  return m;
}

struct SideBySide {
  BlockActivations analytic;
  LivenessResult live;
  int64_t kept_output = 0;  // block.output, handed to the next block
  int64_t kept_grad = 0;    // grad.block_input, handed to the previous block
  int64_t incoming_grad = 0;
};

SideBySide RunBoth(const ModelSpec& m, const TrainingSpec& t) {
  SideBySide r;
  auto am = ResolveActivations(m, t);
  EXPECT_TRUE(am.ok()) << am.status().ToString();
  r.analytic = am->block;
  auto set = TransformerBlockProgram(m, t);
  EXPECT_TRUE(set.ok()) << set.status().ToString();
  // The generated programs survive the JSON round trip the CLI uses.
  auto parsed = ParseProgramJson(ProgramSetToJson(*set));
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto live = SimulateLiveness(*parsed);
  EXPECT_TRUE(live.ok()) << live.status().ToString();
  r.live = *live;
  r.kept_output = r.kept_grad = r.incoming_grad = BlockBoundaryBytes(m, t);
  return r;
}

int64_t AfterProgram(const SideBySide& r, int p) { return r.live.program_end[p] - r.live.persistable_bytes; }

TEST(BlockProgramTest, ReadmeBlockForwardKeepsTheRecipesTensors) {
  TrainingSpec t;
  t.micro_batch = 4;
  SideBySide r = RunBoth(ReadmeModel(), t);
  const int64_t s = 2048, b = 4, a = 32;
  const int64_t stats = 2 * s * b * 2 * 4;  // two LayerNorms' mean and rstd, fp32 per token
  const int64_t lse = b * a * s * 4;        // flash attention's log-sum-exp, fp32 per row
  ASSERT_EQ(r.live.program_end.size(), 3u);
  // After forward: the input (an input of the set), every saved tensor, the kept output, and the
  // incoming gradient of the set counted from the start.
  EXPECT_EQ(AfterProgram(r, 0) - r.kept_output - r.incoming_grad, r.analytic.saved_bytes + stats + lse);
  EXPECT_EQ(r.analytic.saved_bytes, int64_t{1320} << 20);
  // After B: exactly what W needs (linear inputs and output gradients), the recipe's w_bytes.
  EXPECT_EQ(AfterProgram(r, 1) - r.kept_output - r.kept_grad, r.analytic.w_bytes);
  EXPECT_EQ(AfterProgram(r, 2) - r.kept_output - r.kept_grad, 0);
  // The liveness peak is above both: transients (the 2f-wide fc1 output before SiLU frees
  // nothing, gradients in flight during B).
  EXPECT_GT(r.live.peak_bytes - r.live.persistable_bytes, AfterProgram(r, 0));
}

TEST(BlockProgramTest, Gpt22bEagerTensorParallelMatchesKorthikanti) {
  ModelSpec m = *FindModelPreset("gpt3-22b");
  TrainingSpec t;
  t.micro_batch = 1;
  t.tp = 8;
  const int64_t s = 2048, b = 1, h = 6144, a = 64, tp = 8, sbh = s * b * h;
  SideBySide r = RunBoth(m, t);
  const int64_t stats = 2 * s * b * 2 * 4;
  EXPECT_EQ(r.analytic.saved_bytes, 10 * sbh + 24 * sbh / tp + 5 * a * s * s * b / tp);
  EXPECT_EQ(AfterProgram(r, 0) - r.kept_output - r.incoming_grad, r.analytic.saved_bytes + stats);
  EXPECT_EQ(AfterProgram(r, 1) - r.kept_output - r.kept_grad, r.analytic.w_bytes);
}

TEST(BlockProgramTest, FullRecomputeKeepsOnlyTheInput) {
  ModelSpec m = *FindModelPreset("gpt3-22b");
  TrainingSpec t;
  t.recompute = Recompute::kFull;
  SideBySide r = RunBoth(m, t);
  ASSERT_EQ(r.live.program_end.size(), 4u);  // forward, recompute, B, W
  EXPECT_EQ(AfterProgram(r, 0) - r.kept_output - r.incoming_grad, r.analytic.stored_bytes);
  EXPECT_EQ(r.analytic.stored_bytes, 2 * 2048 * 6144);
}

TEST(BlockProgramTest, SelectiveRecomputeDropsTheAttentionCore) {
  ModelSpec m = *FindModelPreset("gpt3-22b");
  TrainingSpec t;
  t.recompute = Recompute::kSelective;
  SideBySide r = RunBoth(m, t);
  const int64_t stats = 2 * 2048 * 2 * 4;
  EXPECT_EQ(AfterProgram(r, 0) - r.kept_output - r.incoming_grad, r.analytic.stored_bytes + stats);
  EXPECT_EQ(r.analytic.stored_bytes, 34 * 2048 * 6144);
}

TEST(BlockProgramTest, GqaFlashAndEager) {
  ModelSpec m = *FindModelPreset("llama3-8b");
  m.seq_len = 1024;
  for (Attention at : {Attention::kFlash, Attention::kEager}) {
    m.attention = at;
    TrainingSpec t;
    t.tp = 2;
    SideBySide r = RunBoth(m, t);
    const int64_t stats = 2 * 1024 * 1 * 4;  // RMSNorm: one rstd per token, two norms
    const int64_t lse = at == Attention::kFlash ? 1 * 16 * 1024 * 4 : 0;
    EXPECT_EQ(AfterProgram(r, 0) - r.kept_output - r.incoming_grad, r.analytic.saved_bytes + stats + lse)
        << AttentionName(at);
    EXPECT_EQ(AfterProgram(r, 1) - r.kept_output - r.kept_grad, r.analytic.w_bytes) << AttentionName(at);
  }
}

// Korthikanti et al. 2022 Table 2, tensor plus sequence parallel: sbh(34 + 5as/h)/t, and the
// simulator keeps exactly that (plus the norms' statistics, a sequence shard of them too).
TEST(BlockProgramTest, Gpt22bSequenceParallelKeepsATthOfTheBlock) {
  ModelSpec m = *FindModelPreset("gpt3-22b");
  TrainingSpec t;
  t.micro_batch = 1;
  t.tp = 8;
  t.sp = true;
  const int64_t s = 2048, b = 1, h = 6144, a = 64, tp = 8, sbh = s * b * h;
  SideBySide r = RunBoth(m, t);
  const int64_t stats = 2 * (s / tp) * b * 2 * 4;
  EXPECT_EQ(r.analytic.saved_bytes, (34 * sbh + 5 * a * s * s * b) / tp);
  EXPECT_EQ(AfterProgram(r, 0) - r.kept_output - r.incoming_grad, r.analytic.saved_bytes + stats);
  EXPECT_EQ(AfterProgram(r, 1) - r.kept_output - r.kept_grad, r.analytic.w_bytes);
  EXPECT_EQ(AfterProgram(r, 2) - r.kept_output - r.kept_grad, 0);
  // The same block without SP keeps 10sbh more (the replicated LayerNorm, dropout and residual
  // tensors) and peaks higher.
  t.sp = false;
  SideBySide no_sp = RunBoth(m, t);
  EXPECT_EQ(AfterProgram(no_sp, 0) - no_sp.kept_output - no_sp.incoming_grad - (AfterProgram(r, 0) - r.kept_output - r.incoming_grad),
            10 * sbh - 10 * sbh / tp + 2 * s * b * 2 * 4 - stats);
  EXPECT_LT(r.live.peak_bytes, no_sp.live.peak_bytes);
}

TEST(BlockProgramTest, SelectiveRecomputeWithSequenceParallelKeeps34SbhOverT) {
  ModelSpec m = *FindModelPreset("gpt3-22b");
  TrainingSpec t;
  t.tp = 8;
  t.sp = true;
  t.recompute = Recompute::kSelective;
  SideBySide r = RunBoth(m, t);
  const int64_t sbh = 2048 * 6144, stats = 2 * (2048 / 8) * 2 * 4;
  EXPECT_EQ(r.analytic.stored_bytes, 34 * sbh / 8);
  EXPECT_EQ(AfterProgram(r, 0) - r.kept_output - r.incoming_grad, r.analytic.stored_bytes + stats);
}

TEST(BlockProgramTest, ReadmeBlockWithSequenceParallelMatchesTheRecipe) {
  TrainingSpec t;
  t.micro_batch = 4;
  t.tp = 2;
  t.sp = true;
  SideBySide r = RunBoth(ReadmeModel(), t);
  const int64_t s = 2048, b = 4, a = 32, tp = 2;
  const int64_t stats = 2 * (s / tp) * b * 2 * 4;
  const int64_t lse = b * (a / tp) * s * 4;
  EXPECT_EQ(AfterProgram(r, 0) - r.kept_output - r.incoming_grad, r.analytic.saved_bytes + stats + lse);
  EXPECT_EQ(r.analytic.saved_bytes, (int64_t{1320} << 20) / tp);  // every tensor of the 1320 MB is split
  EXPECT_EQ(AfterProgram(r, 1) - r.kept_output - r.kept_grad, r.analytic.w_bytes);
}

TEST(BlockProgramTest, TheBoundaryTensorIsASequenceShardUnderSequenceParallelism) {
  ModelSpec m = ReadmeModel();
  TrainingSpec t;
  t.micro_batch = 4;
  EXPECT_EQ(BlockBoundaryBytes(m, t), 2048 * 4 * 4096 * 2);
  t.tp = 4;
  EXPECT_EQ(BlockBoundaryBytes(m, t), 2048 * 4 * 4096 * 2);
  t.sp = true;
  EXPECT_EQ(BlockBoundaryBytes(m, t), 2048 / 4 * 4 * 4096 * 2);
}

TEST(BlockProgramTest, SequenceParallelNeedsTpToDivideTheSequence) {
  ModelSpec m = ReadmeModel();
  m.seq_len = 2050;
  TrainingSpec t;
  t.tp = 4;
  t.sp = true;
  auto set = TransformerBlockProgram(m, t);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), Code::kInvalidArgument);
  EXPECT_NE(set.status().message().find("2050 % 4"), std::string::npos) << set.status().message();
}

}  // namespace
}  // namespace pipecoord::memory
