#include "data/token_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace pipecoord::data {
namespace {

TokenStream Stream(const std::vector<uint16_t>& ids) {
  return TokenStream(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(ids.data()), ids.size() * 2),
                     TokenDtype::kUint16);
}

TEST(TokenStats, UnigramEntropyExact) {
  // Four equally frequent ids: 2 bits. One id only: 0. p = (1/2, 1/4, 1/4): 1.5 bits.
  std::vector<uint16_t> uniform = {0, 1, 2, 3, 3, 2, 1, 0};
  EXPECT_DOUBLE_EQ(UnigramEntropyBits(Stream(uniform), 256), 2.0);
  std::vector<uint16_t> one = {7, 7, 7};
  EXPECT_DOUBLE_EQ(UnigramEntropyBits(Stream(one), 256), 0.0);
  std::vector<uint16_t> skew = {5, 5, 9, 200};
  EXPECT_DOUBLE_EQ(UnigramEntropyBits(Stream(skew), 256), 1.5);
  EXPECT_EQ(UnigramEntropyBits(TokenStream(), 256), 0.0);
}

}  // namespace
}  // namespace pipecoord::data
