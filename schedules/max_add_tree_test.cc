#include "schedules/max_add_tree.h"

#include <gtest/gtest.h>

namespace pipecoord::schedules {
namespace {

TEST(MaxAddTreeTest, LastAboveAfterRangeAdds) {
  MaxAddTree t({1, 3, 0, 2, 0});
  EXPECT_EQ(t.LastAbove(0, 5, 1.5), 3);
  EXPECT_EQ(t.LastAbove(0, 3, 1.5), 1);
  EXPECT_EQ(t.LastAbove(2, 3, 1.5), -1);
  EXPECT_EQ(t.LastAbove(0, 5, 3), -1);
  t.Add(2, 5, 2.0);  // {1, 3, 2, 4, 2}
  EXPECT_EQ(t.LastAbove(0, 5, 3), 3);
  EXPECT_EQ(t.LastAbove(0, 5, 1.5), 4);
  t.Add(3, 4, -3.0);  // {1, 3, 2, 1, 2}
  EXPECT_EQ(t.LastAbove(0, 5, 2.5), 1);
  EXPECT_EQ(t.LastAbove(2, 5, 1.5), 4);
  EXPECT_EQ(t.LastAbove(3, 4, 0.5), 3);
}

TEST(MaxAddTreeTest, MatchesABruteForceScan) {
  std::vector<double> v(37);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 7) % 11);
  MaxAddTree t(v);
  for (int step = 0; step < 50; ++step) {
    const int lo = (step * 5) % 37, hi = std::min(37, lo + 1 + (step * 3) % 20);
    const double d = (step % 3) - 1.0;
    t.Add(lo, hi, d);
    for (int i = lo; i < hi; ++i) v[i] += d;
    const double x = (step * 13) % 10;
    int want = -1;
    for (int i = hi - 1; i >= 0 && want < 0; --i) {
      if (i >= 2 && v[i] > x) want = i;
    }
    EXPECT_EQ(t.LastAbove(2, hi, x), want) << step;
  }
}

}  // namespace
}  // namespace pipecoord::schedules
