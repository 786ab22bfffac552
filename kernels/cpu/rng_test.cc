#include "kernels/cpu/rng.h"

#include <gtest/gtest.h>

#include <vector>

namespace pipecoord::kernels::cpu {
namespace {

TEST(RngTest, SplitMixMatchesThePublishedSequence) {
  // Vigna's splitmix64.c from seed 0 starts with these outputs.
  uint64_t s = 0;
  EXPECT_EQ(SplitMix64(&s), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(SplitMix64(&s), 0x6E789E6AA1B965F4ULL);
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
  EXPECT_EQ(CombineSeeds(1, 2), CombineSeeds(1, 2));
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
