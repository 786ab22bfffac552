// The published construction of V-Half and V-Min (v_block_greedy.h) against the published code's
// own output: the orders below were printed by running Qi et al.'s zbv_greedy.py
// (sail-sg/zero-bubble-pipeline-parallelism at 39f2c186) through
// testdata/published_v_block.py, once, and pasted here. The order does not depend on the costs
// (they only time it); the same script's p 16, m 64 v-half order was checked equal too.
#include "schedules/v_block_greedy.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pipecoord::schedules {
namespace {

std::vector<std::string> Rows(const std::vector<std::vector<Action>>& orders) {
  std::vector<std::string> rows;
  for (const auto& rank : orders) {
    std::string row;
    for (const Action& a : rank) {
      row += (row.empty() ? "" : ",") + std::to_string(a.stage) +
             (a.op == Op::kF ? "F" : a.op == Op::kB ? "B" : "W") + std::to_string(a.mb);
    }
    rows.push_back(row);
  }
  return rows;
}

// The blocks as v_half.cc and v_min.cc write them.
std::vector<VBlockRow> HalfBlock(int p) {
  const int g = p % 2 == 0 ? 3 : 0;
  std::vector<VBlockRow> block(p);
  for (int i = 0; i < p; ++i) block[i] = {2 * i, 3 * p - 2 - i, 3 * p - 1 + g + 2 * i, 6 * p - 2 + g - i};
  return block;
}

std::vector<VBlockRow> MinBlock(int p) {
  const int g = p % 3 == 0 ? 2 : 0;
  std::vector<VBlockRow> block(p);
  for (int i = 0; i < p; ++i) block[i] = {i, 2 * p - 1 - i, 2 * p + g + i, 4 * p + g - 1 - i};
  return block;
}

// `published_v_block.py ZBV_GREEDY_PY half 4 8`
TEST(VBlockGreedyTest, VHalfMatchesThePublishedOrder) {
  const std::vector<std::string> published = {
      "0F0,0F1,0F2,0F3,0F4,7F0,7B0,7W0,7F1,7B1,7W1,7F2,0B0,7B2,7W2,7F3,0W0,0F5,0B1,7B3,7W3,7F4,0W1,0F6,"
      "0B2,7B4,7W4,7F5,0W2,0F7,0B3,7B5,7W5,7F6,7B6,7W6,0B4,0W3,0W4,7F7,7B7,0B5,7W7,0B6,0W5,0W6,0B7,0W7",
      "1F0,1F1,1F2,1F3,6F0,6F1,6B0,6W0,6F2,6B1,6W1,1B0,1W0,1F4,6F3,6B2,6W2,1B1,1W1,1F5,6F4,6B3,6W3,1B2,"
      "1W2,1F6,6F5,6B4,6W4,1B3,1F7,1W3,6F6,6B5,6W5,1B4,6B6,6W6,6F7,1W4,1B5,6B7,1B6,6W7,1W5,1W6,1B7,1W7",
      "2F0,2F1,2F2,5F0,5F1,5F2,5B0,5W0,2F3,5B1,2B0,5W1,2W0,5F3,2F4,2B1,5B2,5W2,5F4,2W1,2F5,2B2,5B3,5W3,"
      "5F5,2W2,2F6,2B3,5B4,5W4,5F6,2W3,2F7,2B4,5B5,5W5,5F7,5B6,2B5,5W6,2B6,5B7,5W7,2W4,2B7,2W5,2W6,2W7",
      "3F0,4F0,3F1,4F1,3F2,4F2,4B0,4W0,3B0,3W0,3F3,4F3,4B1,4W1,3B1,3W1,3F4,4F4,4B2,4W2,3B2,3W2,3F5,4F5,"
      "4B3,4W3,3B3,3F6,3W3,4F6,4B4,3B4,4W4,3F7,3W4,4F7,4B5,3B5,4B6,3B6,4W5,4W6,4B7,3B7,4W7,3W5,3W6,3W7",
  };
  auto orders = GreedyVBlockOrders(8, HalfBlock(4));
  ASSERT_TRUE(orders.ok()) << orders.status().ToString();
  EXPECT_EQ(Rows(*orders), published);
}

// `published_v_block.py ZBV_GREEDY_PY min 3 6`: p a multiple of 3 (the block's gap of 2).
TEST(VBlockGreedyTest, VMinMatchesThePublishedOrder) {
  const std::vector<std::string> published = {
      "0F0,0F1,0F2,5F0,5B0,5W0,5F1,0B0,5B1,5W1,0W0,5F2,0F3,0B1,5B2,5W2,0W1,5F3,0F4,0B2,5B3,5W3,0W2,5F4,"
      "0F5,0B3,5B4,5W4,0W3,5F5,5B5,0B4,5W5,0W4,0B5,0W5",
      "1F0,1F1,4F0,4F1,4B0,4W0,1B0,1F2,1W0,4B1,4F2,4W1,1B1,1F3,1W1,4B2,4F3,4W2,1B2,1F4,1W2,4B3,4F4,4W3,"
      "1B3,1F5,1W3,4B4,4F5,4W4,1B4,4B5,4W5,1W4,1B5,1W5",
      "2F0,3F0,2F1,3F1,3B0,2B0,3W0,2W0,2F2,3F2,3B1,2B1,3W1,2W1,2F3,3F3,3B2,2B2,3W2,2W2,2F4,3F4,3B3,2B3,"
      "3W3,2W3,2F5,3F5,3B4,2B4,3W4,2W4,3B5,2B5,3W5,2W5",
  };
  auto orders = GreedyVBlockOrders(6, MinBlock(3));
  ASSERT_TRUE(orders.ok()) << orders.status().ToString();
  EXPECT_EQ(Rows(*orders), published);
}

// Every pass exactly once, on its rank, for odd p and shapes the pipeline never fills (m < p).
TEST(VBlockGreedyTest, EveryPassOnceForSmallShapes) {
  for (int p = 1; p <= 7; ++p) {
    for (int m = 1; m <= 9; m += 2) {
      for (const auto& block : {HalfBlock(p), MinBlock(p)}) {
        auto orders = GreedyVBlockOrders(m, block);
        ASSERT_TRUE(orders.ok()) << "p=" << p << " m=" << m << ": " << orders.status().ToString();
        ASSERT_EQ(orders->size(), static_cast<size_t>(p));
        for (int r = 0; r < p; ++r) {
          std::vector<int> seen(3 * 2 * p * m, 0);
          for (const Action& a : (*orders)[r]) {
            ASSERT_TRUE(a.stage == r || a.stage == 2 * p - 1 - r) << "p=" << p << " m=" << m;
            const int kind = a.op == Op::kF ? 0 : a.op == Op::kB ? 1 : 2;
            ++seen[(kind * 2 * p + a.stage) * m + a.mb];
          }
          EXPECT_EQ((*orders)[r].size(), static_cast<size_t>(6 * m)) << "p=" << p << " m=" << m << " rank " << r;
          for (int n : seen) EXPECT_LE(n, 1);
        }
      }
    }
  }
}

}  // namespace
}  // namespace pipecoord::schedules
