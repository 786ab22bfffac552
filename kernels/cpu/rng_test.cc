#include "kernels/cpu/rng.h"

#include <gtest/gtest.h>

#include <cstring>
#include <iterator>
#include <vector>

#include "kernels/cpu/known_answers_for_tests.h"

namespace pipecoord::kernels::cpu {
namespace {

TEST(RngTest, SplitMixMatchesThePublishedSequence) {
  // Vigna's splitmix64.c from seed 0 starts with these outputs.
  uint64_t s = 0;
  EXPECT_EQ(SplitMix64(&s), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(SplitMix64(&s), 0x6E789E6AA1B965F4ULL);
}

// The streams seed weights and synthetic data on every rank and must not change: pinned to
// constants computed independently by known_answers.py.
TEST(RngTest, MatchesIndependentPythonReference) {
  uint64_t s = 0;
  for (uint64_t want : known_answers::kSplitMix64FromZero) EXPECT_EQ(SplitMix64(&s), want);
  for (size_t i = 0; i < std::size(known_answers::kMix64Inputs); ++i) {
    EXPECT_EQ(Mix64(known_answers::kMix64Inputs[i]), known_answers::kMix64Outputs[i]) << i;
  }
  Rng r0(0), r7(7), rdb(0xDEADBEEF);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r0.Next(), known_answers::kRngNextSeed0[i]) << i;
    EXPECT_EQ(r7.Next(), known_answers::kRngNextSeed7[i]) << i;
    EXPECT_EQ(rdb.Next(), known_answers::kRngNextSeedDEADBEEF[i]) << i;
  }
  Rng r3(3);
  for (uint64_t want : known_answers::kRng3UniformDoubleBits) {
    const double u = r3.UniformDouble();
    uint64_t bits;
    std::memcpy(&bits, &u, sizeof bits);
    EXPECT_EQ(bits, want);
  }
  for (uint32_t want : known_answers::kRng3ThenBelow10) EXPECT_EQ(r3.Below(10), want);
  Rng r5(5);
  for (uint32_t want : known_answers::kRng5Below1000003) EXPECT_EQ(r5.Below(1000003), want);

  float f[6];
  Rng(71).FillUniform(f, 6, -1.0, 1.0);
  for (int i = 0; i < 6; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &f[i], sizeof bits);
    EXPECT_EQ(bits, known_answers::kRng71FloatBits[i]) << i;
  }
  double d[3];
  Rng(9).FillUniform(d, 3, -2.5, 4.0);
  for (int i = 0; i < 3; ++i) {
    uint64_t bits;
    std::memcpy(&bits, &d[i], sizeof bits);
    EXPECT_EQ(bits, known_answers::kRng9DoubleBits[i]) << i;
  }

  EXPECT_EQ(HashString(""), known_answers::kHashStringEmpty);
  EXPECT_EQ(HashString("a"), known_answers::kHashStringA);
  EXPECT_EQ(HashString("layers.1.attention.wq"), known_answers::kHashStringWq);
  EXPECT_EQ(CombineSeeds(1, 2), known_answers::kCombineSeeds1And2);
  EXPECT_EQ(CombineSeeds(2, 1), known_answers::kCombineSeeds2And1);
}

TEST(RngTest, SameSeedSameStreamDifferentSeedDifferentStream) {
  Rng a(7), b(7), c(8);
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    EXPECT_NE(x, c.Next());
  }
}

TEST(RngTest, UniformStaysInRangeAndBelowCoversEveryValue) {
  Rng r(3);
  std::vector<int> seen(10, 0);
  double mean = 0;
  for (int i = 0; i < 20000; ++i) {
    const double u = r.UniformDouble();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    mean += u;
    const uint32_t k = r.Below(10);
    ASSERT_LT(k, 10u);
    ++seen[k];
  }
  EXPECT_NEAR(mean / 20000, 0.5, 0.01);
  for (int c : seen) EXPECT_GT(c, 1800);
}

TEST(RngTest, NamesAndSeedsCombineAsymmetrically) {
  EXPECT_EQ(HashString(""), 0xCBF29CE484222325ULL);  // FNV-1a offset basis
  EXPECT_NE(HashString("layers.1.attention.wq"), HashString("layers.10.attention.wq"));
  EXPECT_NE(CombineSeeds(1, 2), CombineSeeds(2, 1));
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
