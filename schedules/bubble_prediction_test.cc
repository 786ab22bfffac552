// The closed forms agree with the simulator, window by window.
#include "schedules/bubble_prediction.h"

#include <gtest/gtest.h>

#include "schedules/test_util.h"

namespace pipecoord::schedules {
namespace {

using testing::MustGenerate;
using testing::MustSimulate;
using testing::Spec;

TEST(BubblePredictionTest, FThenBAndOneFOneBMatchTheSimulatorExactly) {
  for (const char* name : {"fthenb", "1f1b"}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = p; m <= 3 * p; m += 1 + p / 3) {
        for (auto [f, b, w] : {std::tuple{1.0, 1.0, 1.0}, std::tuple{1.0, 2.0, 0.0}, std::tuple{2.0, 0.5, 0.5}}) {
          CostModel c;
          c.f = f;
          c.b = b;
          c.w = w;
          Simulation sim = MustSimulate(MustGenerate(name, Spec(p, m)), c);
          auto pred = PredictBubbles(name, p, 1, m, f, b, w);
          ASSERT_TRUE(pred.ok()) << pred.status().ToString();
          EXPECT_NEAR(pred->makespan, sim.makespan, 1e-9);
          for (int r = 0; r < p; ++r) {
            const auto& want = sim.ranks[r].idle;
            const auto& got = pred->windows[r];
            ASSERT_EQ(got.size(), want.size()) << name << " p=" << p << " m=" << m << " r=" << r;
            for (size_t i = 0; i < got.size(); ++i) {
              EXPECT_NEAR(got[i].start, want[i].start, 1e-9) << name << " r=" << r << " i=" << i;
              EXPECT_NEAR(got[i].end, want[i].end, 1e-9) << name << " r=" << r << " i=" << i;
            }
            EXPECT_EQ(pred->unplaced[r], 0.0);
          }
        }
      }
    }
  }
}

TEST(BubblePredictionTest, InterleavedPlacesHeadAndTailAndCountsTheRest) {
  for (int p = 2; p <= 6; ++p) {
    for (int v = 2; v <= 3; ++v) {
      for (int m = p; m <= 3 * p; m += p) {
        for (auto [f, b, w] : {std::tuple{1.0, 1.0, 1.0}, std::tuple{1.0, 0.5, 0.5}}) {
          CostModel c;
          c.f = f;
          c.b = b;
          c.w = w;
          Simulation sim = MustSimulate(MustGenerate("interleaved", Spec(p, m, v)), c);
          auto pred = PredictBubbles("interleaved", p, v, m, f, b, w);
          ASSERT_TRUE(pred.ok());
          EXPECT_NEAR(pred->makespan, sim.makespan, 1e-9) << p << " " << v << " " << m;
          for (int r = 0; r < p; ++r) {
            const auto& want = sim.ranks[r].idle;
            const auto& got = pred->windows[r];
            double sim_total = 0, pred_total = pred->unplaced[r];
            for (const Interval& i : want) sim_total += i.end - i.start;
            for (const Interval& i : got) pred_total += i.end - i.start;
            EXPECT_NEAR(pred_total, sim_total, 1e-9) << "p=" << p << " v=" << v << " m=" << m << " r=" << r;
            if (r > 0) {  // head and tail windows are placed exactly
              ASSERT_GE(want.size(), 2u);
              EXPECT_NEAR(got.front().end, want.front().end, 1e-9);
              EXPECT_NEAR(got.back().start, want.back().start, 1e-9);
            }
          }
        }
      }
    }
  }
}

TEST(BubblePredictionTest, RefusesWhatItCannotPredict) {
  EXPECT_EQ(PredictBubbles("zbv", 4, 2, 8, 1, 1, 1).status().message(),
            "no closed form for schedule \"zbv\": use the simulator's idle windows");
  EXPECT_FALSE(PredictBubbles("1f1b", 4, 1, 3, 1, 1, 1).ok());
  EXPECT_FALSE(PredictBubbles("interleaved", 4, 2, 6, 1, 1, 1).ok());
}

}  // namespace
}  // namespace pipecoord::schedules
