#include "common/median.h"

#include <gtest/gtest.h>

#include <random>

namespace pipecoord {
namespace {

// Every member left out in turn gives what Median gives over a copy without it (the brute force
// the straggler check used), bit for bit: odd and even sizes, ties, one and two members.
TEST(LeaveOneOutMedianTest, EqualsTheMedianOfTheOthersBitForBit) {
  std::mt19937 rng(7);
  for (int n : {1, 2, 3, 4, 5, 8, 17, 64, 301}) {
    for (bool ties : {false, true}) {
      std::vector<double> values(n);
      std::uniform_real_distribution<double> u(0.1, 3.0);
      std::uniform_int_distribution<int> few(1, 4);
      for (double& v : values) v = ties ? few(rng) * 0.25 : u(rng);
      const LeaveOneOutMedian loo(values);
      ASSERT_EQ(loo.size(), values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        std::vector<double> others;
        for (size_t k = 0; k < values.size(); ++k) {
          if (k != i) others.push_back(values[k]);
        }
        EXPECT_EQ(loo.Without(values[i]), Median(others)) << "n " << n << " ties " << ties << " left out " << i;
      }
    }
  }
  EXPECT_EQ(LeaveOneOutMedian({}).Without(1.0), 0.0);
}

}  // namespace
}  // namespace pipecoord
