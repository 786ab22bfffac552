// The host bf16 conversions (no GPU needed): round to nearest even, exact widening.
#include "kernels/cuda/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace pipecoord::kernels::cuda {
namespace {

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

TEST(Bf16Test, ExactValuesKeepTheirBits) {
  EXPECT_EQ(FloatToBf16Bits(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBf16Bits(-2.0f), 0xC000);
  EXPECT_EQ(FloatToBf16Bits(0.0f), 0x0000);
  EXPECT_EQ(FloatToBf16Bits(-0.0f), 0x8000);
  EXPECT_EQ(Bf16BitsToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bf16BitsToFloat(0xC0490000u >> 16), -3.140625f);
}

TEST(Bf16Test, RoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between 1 (even mantissa) and 1 + 2^-7: to 1.
  EXPECT_EQ(FloatToBf16Bits(FromBits(0x3F808000u)), 0x3F80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  EXPECT_EQ(FloatToBf16Bits(FromBits(0x3F818000u)), 0x3F82);
  // Just above halfway rounds up, just below rounds down.
  EXPECT_EQ(FloatToBf16Bits(FromBits(0x3F808001u)), 0x3F81);
  EXPECT_EQ(FloatToBf16Bits(FromBits(0x3F807FFFu)), 0x3F80);
  // The largest finite float rounds up to infinity.
  EXPECT_EQ(FloatToBf16Bits(std::numeric_limits<float>::max()), 0x7F80);
}

TEST(Bf16Test, RelativeRoundingErrorIsAtMostHalfAUlp) {
  for (float v = -100.0f; v < 100.0f; v += 0.0137f) {
    const float r = Bf16BitsToFloat(FloatToBf16Bits(v));
    EXPECT_LE(std::fabs(r - v), std::fabs(v) * 0x1.0p-8f) << v;
  }
}

TEST(Bf16Test, NanStaysNan) {
  const uint16_t b = FloatToBf16Bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(Bf16BitsToFloat(b)));
  // A NaN whose payload sits only in the low 16 bits must not become infinity.
  EXPECT_TRUE(std::isnan(Bf16BitsToFloat(FloatToBf16Bits(FromBits(0x7F800001u)))));
  EXPECT_TRUE(std::isinf(Bf16BitsToFloat(FloatToBf16Bits(std::numeric_limits<float>::infinity()))));
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
