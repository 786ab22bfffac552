// Peak activations of the V-shaped and zero-bubble schedules through the memory model, in bytes,
// against what their papers claim, for GPT 22B (t = 1, b = 1) on p = 8 ranks, 48 layers,
// 24 micro-batches: a block stores S = sbh(34 + 5as/h) and keeps W = 32sbh from B until W.
#include <gtest/gtest.h>

#include "memory/estimate.h"
#include "memory/presets.h"

namespace pipecoord::memory {
namespace {

constexpr int kP = 8;
constexpr int64_t kS = int64_t{2048} * 6144 * 34 + int64_t{5} * 64 * 2048 * 2048;
constexpr int64_t kShare = 6 * kS;  // one rank's 48 / 8 blocks, one micro-batch

Result<MemoryReport> Estimate(const char* schedule) {
  ModelSpec m = *FindModelPreset("gpt3-22b");
  TrainingSpec t;
  t.pp = kP;
  t.microbatches = 24;
  t.schedule = schedule;
  return EstimateMemory(m, t);
}

// Ranks 1 .. p-1: neither the embedding nor the head (rank 0 holds both ends of a V).
void ExpectMiddleRanks(const char* schedule, int64_t expected) {
  auto rep = Estimate(schedule);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  for (int r = 1; r < kP; ++r) EXPECT_EQ(rep->ranks[r].activations_bytes, expected) << schedule << " rank " << r;
}

TEST(VScheduleMemoryTest, ZbvHoldsWhat1F1BsFirstRankHolds) {
  // Qi et al. 2024, ZB-V: the peak of 1F1B (p micro-batches of a rank's share) on every rank.
  ExpectMiddleRanks("zbv", kP * kShare);
  auto one = Estimate("1f1b");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->ranks[1].activations_bytes, (kP - 1) * kShare);
}

TEST(VScheduleMemoryTest, VHalfHoldsAboutHalf) {
  // Qi et al. 2024b, V-Half: p/2 + 1 micro-batches of a rank's share.
  ExpectMiddleRanks("v-half", (kP / 2 + 1) * kShare);
}

TEST(VScheduleMemoryTest, VMinHoldsAboutAThird) {
  // V-Min: about a third of 1F1B's p; never more than p/3 + 1 here.
  auto rep = Estimate("v-min");
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  for (int r = 1; r < kP; ++r) {
    EXPECT_LE(rep->ranks[r].activations_bytes * 3, (kP + 3) * kShare) << "rank " << r;
    EXPECT_GE(rep->ranks[r].activations_bytes * 3, kP * kShare) << "rank " << r;
  }
}

TEST(VScheduleMemoryTest, ZeroBubbleH2HoldsMoreThan1F1B) {
  // ZB-H2 buys its near-zero bubble with up to 2p - 1 micro-batches in flight on rank 0.
  auto h2 = Estimate("zbh2");
  auto one = Estimate("1f1b");
  ASSERT_TRUE(h2.ok() && one.ok());
  EXPECT_GT(h2->ranks[0].activations_bytes, one->ranks[0].activations_bytes);
  EXPECT_LE(h2->ranks[0].live_microbatches, 2 * kP - 1);
}

}  // namespace
}  // namespace pipecoord::memory
