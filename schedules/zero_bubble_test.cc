// ZB-H1 and ZB-H2: exact orders checked by hand against the Zero Bubble paper's figure 3, their
// closed forms over a grid of shapes and costs, their peak activations, and refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "schedules/test_util.h"
#include "schedules/zb_rank_order.h"

namespace pipecoord::schedules {
namespace {

using testing::MustGenerate;
using testing::MustSimulate;
using testing::RankText;
using testing::Spec;

using Costs = std::tuple<double, double, double>;

CostModel Model(Costs fbw, double comm = 0, double w_share = 0.5) {
  CostModel c;
  std::tie(c.f, c.b, c.w) = fbw;
  c.comm = comm;
  c.w_share = w_share;
  return c;
}

std::vector<double> Starts(const Simulation& sim, int rank) {
  std::vector<double> out;
  for (const Interval& t : sim.timing[rank]) out.push_back(t.start);
  return out;
}

double LongestSpan(const Simulation& sim) {
  double span = 0;
  for (const RankStats& r : sim.ranks) span = std::max(span, r.last_end - r.first_start);
  return span;
}

// p = 3, m = 4, f = b = w = 1, as in the paper's figure 3 (top): p - r forwards, then B and the
// W r micro-batches behind it, so rank r ends with r + 1 W's while the last input gradients
// run down to rank 0. By hand: rank 2 runs F0 at 2 and B0 at 3; rank 1's B0 follows at 4 and
// rank 0's at 5, after an idle 2 = (p - 1) b; from there no rank idles and all end at 14 =
// m t + (p - 1)(f + b - w).
TEST(Zbh1Test, ExactOrderAndTimelineP3M4) {
  Schedule s = MustGenerate("zbh1", Spec(3, 4));
  EXPECT_EQ(RankText(s.ranks[0]), "0F0 0F1 0F2 0B0 0W0 0F3 0B1 0W1 0B2 0W2 0B3 0W3");
  EXPECT_EQ(RankText(s.ranks[1]), "1F0 1F1 1B0 1F2 1B1 1W0 1F3 1B2 1W1 1B3 1W2 1W3");
  EXPECT_EQ(RankText(s.ranks[2]), "2F0 2B0 2F1 2B1 2F2 2B2 2W0 2F3 2B3 2W1 2W2 2W3");
  Simulation sim = MustSimulate(s, CostModel{});
  EXPECT_EQ(Starts(sim, 0), (std::vector<double>{0, 1, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13}));
  EXPECT_EQ(Starts(sim, 1), (std::vector<double>{1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}));
  EXPECT_EQ(Starts(sim, 2), (std::vector<double>{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}));
  EXPECT_DOUBLE_EQ(sim.makespan, 14);
  for (int r = 0; r < 3; ++r) EXPECT_DOUBLE_EQ(sim.ranks[r].last_end, 14) << r;
}

// With m < 2p - 1 the warm-up is cut to m forwards (rank 0 runs all four first).
TEST(Zbh2Test, ExactOrderP3M4) {
  Schedule s = MustGenerate("zbh2", Spec(3, 4));
  EXPECT_EQ(RankText(s.ranks[0]), "0F0 0F1 0F2 0F3 0B0 0W0 0B1 0W1 0B2 0W2 0B3 0W3");
  EXPECT_EQ(RankText(s.ranks[1]), "1F0 1F1 1F2 1B0 1F3 1B1 1B2 1W0 1B3 1W1 1W2 1W3");
  EXPECT_EQ(RankText(s.ranks[2]), "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3 2W0 2W1 2W2 2W3");
  // Rank 0 waits 1 = (2p - 1 - m) f for its first B, the least it can with 4 forwards.
  EXPECT_DOUBLE_EQ(LongestSpan(MustSimulate(s, CostModel{})), 4 * 3 + 1);
}

// p = 3, m = 6, f = b = w = 1, as in the paper's figure 3 (bottom): 2(p - r) - 1 forwards fill
// exactly the wait for the first B, W's run 2r behind, and the end is a parallelogram: rank r
// runs without a gap from r to r + 18 (m t), rank 2 ending with 2p - 1 = 5 W's.
TEST(Zbh2Test, ExactOrderAndTimelineP3M6) {
  Schedule s = MustGenerate("zbh2", Spec(3, 6));
  EXPECT_EQ(RankText(s.ranks[0]),
            "0F0 0F1 0F2 0F3 0F4 0B0 0W0 0F5 0B1 0W1 0B2 0W2 0B3 0W3 0B4 0W4 0B5 0W5");
  EXPECT_EQ(RankText(s.ranks[1]),
            "1F0 1F1 1F2 1B0 1F3 1B1 1F4 1B2 1W0 1F5 1B3 1W1 1B4 1W2 1B5 1W3 1W4 1W5");
  EXPECT_EQ(RankText(s.ranks[2]),
            "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3 2F4 2B4 2W0 2F5 2B5 2W1 2W2 2W3 2W4 2W5");
  Simulation sim = MustSimulate(s, CostModel{});
  for (int r = 0; r < 3; ++r) {
    EXPECT_DOUBLE_EQ(sim.ranks[r].first_start, r) << r;
    EXPECT_DOUBLE_EQ(sim.ranks[r].last_end, r + 18) << r;
    EXPECT_DOUBLE_EQ(sim.ranks[r].busy, 18) << r;
  }
  EXPECT_DOUBLE_EQ(sim.rank_span_bubble_rate, 0);
}

// m t + (p - 1)(f + b - w) when w <= f and w <= b (m >= p, comm = 0).
TEST(Zbh1Test, MakespanClosedFormWhenWIsCheapest) {
  for (Costs fbw : {Costs{1, 1, 1}, Costs{1, 1.2, 0.8}, Costs{1, 2, 1}, Costs{2, 1, 1}, Costs{1, 1.5, 0.5}}) {
    const auto [f, b, w] = fbw;
    for (int p = 2; p <= 8; ++p) {
      for (int m = p; m <= 4 * p; ++m) {
        Simulation sim = MustSimulate(MustGenerate("zbh1", Spec(p, m)), Model(fbw));
        EXPECT_NEAR(sim.makespan, m * (f + b + w) + (p - 1) * (f + b - w), 1e-9)
            << "p=" << p << " m=" << m << " f,b,w=" << f << "," << b << "," << w;
      }
    }
  }
}

// Beyond w <= min(f, b): m t + (p - 1)(max(b, min(f, w)) + max(0, f - w)).
TEST(Zbh1Test, MakespanGeneralClosedForm) {
  for (Costs fbw : {Costs{1, 1, 2}, Costs{0.5, 1, 1}, Costs{1, 0.5, 1}, Costs{3, 1, 2}, Costs{1, 2, 1.5}}) {
    const auto [f, b, w] = fbw;
    for (int p = 2; p <= 8; ++p) {
      for (int m = p; m <= 4 * p; m += 3) {
        Simulation sim = MustSimulate(MustGenerate("zbh1", Spec(p, m)), Model(fbw));
        const double bubble = std::max(b, std::min(f, w)) + std::max(0.0, f - w);
        EXPECT_NEAR(sim.makespan, m * (f + b + w) + (p - 1) * bubble, 1e-9)
            << "p=" << p << " m=" << m << " f,b,w=" << f << "," << b << "," << w;
      }
    }
  }
}

// Rank r holds p - r + r w_share: 1F1B's p - r when W keeps nothing (w_share = 0), p on every
// rank when B frees nothing (w_share = 1). Rank 0 always holds p, 1F1B's peak, and no rank more.
TEST(Zbh1Test, PeakActivationsNeverAbove1F1BsPeak) {
  for (double w_share : {0.0, 0.5, 1.0}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m : {p, 2 * p + 1, 4 * p}) {
        CostModel c = Model({1, 1, 1}, 0, w_share);
        Simulation sim = MustSimulate(MustGenerate("zbh1", Spec(p, m)), c);
        Simulation base = MustSimulate(MustGenerate("1f1b", Spec(p, m)), c);
        double peak = 0, base_peak = 0;
        for (int r = 0; r < p; ++r) {
          EXPECT_DOUBLE_EQ(sim.ranks[r].peak_activations, p - r + r * w_share)
              << "p=" << p << " m=" << m << " r=" << r << " w_share=" << w_share;
          peak = std::max(peak, sim.ranks[r].peak_activations);
          base_peak = std::max(base_peak, base.ranks[r].peak_activations);
        }
        EXPECT_DOUBLE_EQ(peak, base_peak);
        EXPECT_DOUBLE_EQ(peak, p);
      }
    }
  }
}

// m < p is scheduled, not refused: every rank warms up with all m forwards. The step then takes
// p (f + b) + w + (m - 1)(b + max(f, w)).
TEST(Zbh1Test, FewerMicroBatchesThanRanks) {
  Schedule s = MustGenerate("zbh1", Spec(4, 2));
  EXPECT_EQ(RankText(s.ranks[0]), "0F0 0F1 0B0 0W0 0B1 0W1");
  EXPECT_EQ(RankText(s.ranks[3]), "3F0 3B0 3F1 3B1 3W0 3W1");
  for (Costs fbw : {Costs{1, 1, 1}, Costs{1, 1.2, 0.8}, Costs{1, 1, 2}, Costs{2, 1, 1}}) {
    const auto [f, b, w] = fbw;
    for (int p = 2; p <= 8; ++p) {
      for (int m = 1; m < p; ++m) {
        ScheduleSpec spec = Spec(p, m);
        spec.costs = Model(fbw, 0.5);
        ASSERT_TRUE(BuildSchedule("zbh1", spec).ok()) << "p=" << p << " m=" << m;
        Simulation sim = MustSimulate(MustGenerate("zbh1", Spec(p, m)), Model(fbw));
        EXPECT_NEAR(sim.makespan, p * (f + b) + w + (m - 1) * (b + std::max(f, w)), 1e-9)
            << "p=" << p << " m=" << m << " f,b,w=" << f << "," << b << "," << w;
      }
    }
  }
}

// Longest per-rank span m t + (p - 1) max(0, f + b - 2w) when b <= f or w <= f, m >= 2p - 1.
TEST(Zbh2Test, LongestSpanClosedForm) {
  for (Costs fbw : {Costs{1, 1, 1}, Costs{1, 1.2, 0.8}, Costs{1, 2, 1}, Costs{2, 1, 1}, Costs{1, 1, 0.5},
                    Costs{1, 1, 2}, Costs{1, 0.5, 0.5}}) {
    const auto [f, b, w] = fbw;
    for (int p = 2; p <= 8; ++p) {
      for (int m = 2 * p - 1; m <= 4 * p; ++m) {
        Simulation sim = MustSimulate(MustGenerate("zbh2", Spec(p, m)), Model(fbw));
        EXPECT_NEAR(LongestSpan(sim), m * (f + b + w) + (p - 1) * std::max(0.0, f + b - 2 * w), 1e-9)
            << "p=" << p << " m=" << m << " f,b,w=" << f << "," << b << "," << w;
      }
    }
  }
}

// When b > f and w > f, the 2p - 1 warm-up forwards no longer cover the wait for the first B:
// m t + (p - 1) max(0, b - f, f + b - 2w).
TEST(Zbh2Test, LongestSpanGeneralClosedForm) {
  for (Costs fbw : {Costs{0.5, 1, 1}, Costs{1, 2, 1.5}, Costs{1, 3, 1.5}, Costs{0.5, 3, 1}}) {
    const auto [f, b, w] = fbw;
    for (int p = 2; p <= 8; ++p) {
      for (int m = 2 * p - 1; m <= 4 * p; m += 2) {
        Simulation sim = MustSimulate(MustGenerate("zbh2", Spec(p, m)), Model(fbw));
        const double bubble = std::max({0.0, b - f, f + b - 2 * w});
        EXPECT_NEAR(LongestSpan(sim), m * (f + b + w) + (p - 1) * bubble, 1e-9)
            << "p=" << p << " m=" << m << " f,b,w=" << f << "," << b << "," << w;
      }
    }
  }
}

// p <= m < 2p - 1 (and m < p): too few micro-batches to fill the warm-up. With f = b = w the
// longest span is m t + (2p - 1 - m) f: rank 0 runs all m forwards and then can only wait for
// its first B, which comes back at p f + (p - 1) b.
TEST(Zbh2Test, ShortStepsWaitOnlyForTheFirstB) {
  for (int p = 2; p <= 8; ++p) {
    for (int m = 1; m < 2 * p - 1; ++m) {
      Simulation sim = MustSimulate(MustGenerate("zbh2", Spec(p, m)), CostModel{});
      EXPECT_NEAR(LongestSpan(sim), 3.0 * m + (2 * p - 1 - m), 1e-9) << "p=" << p << " m=" << m;
    }
  }
}

// Rank r holds 2(p - r) - 1 + 2r w_share (m >= 2p - 1): 2p - 1 on every rank with w_share = 1,
// 2p - 1 - r with the default 0.5; the pipeline's peak is 2p - 1 against 1F1B's p.
TEST(Zbh2Test, PeakActivations) {
  for (double w_share : {0.0, 0.5, 1.0}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m : {2 * p - 1, 4 * p}) {
        Simulation sim = MustSimulate(MustGenerate("zbh2", Spec(p, m)), Model({1, 1, 1}, 0, w_share));
        for (int r = 0; r < p; ++r) {
          EXPECT_DOUBLE_EQ(sim.ranks[r].peak_activations, 2 * (p - r) - 1 + 2 * r * w_share)
              << "p=" << p << " m=" << m << " r=" << r << " w_share=" << w_share;
        }
        EXPECT_DOUBLE_EQ(sim.ranks[0].peak_activations, 2 * p - 1);
      }
    }
  }
}

// Both pass the communication pass and the validator (blocking send/recv), comm > 0 included.
TEST(ZeroBubbleTest, BuildScheduleWithCommunication) {
  for (const char* name : {"zbh1", "zbh2"}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m : {1, p, 2 * p - 1, 3 * p + 1}) {
        for (double comm : {0.0, 0.1, 1.5}) {
          ScheduleSpec spec = Spec(p, m);
          spec.costs = Model({1, 1.2, 0.8}, comm);
          auto s = BuildSchedule(name, spec);
          ASSERT_TRUE(s.ok()) << name << " p=" << p << " m=" << m << " comm=" << comm << ": "
                              << s.status().ToString();
          EXPECT_TRUE(s->HasCommunication() || p == 1);
          EXPECT_TRUE(Simulate(*s, spec.costs).ok());
        }
      }
    }
  }
}

TEST(ZeroBubbleTest, RefusesChunksAndBadShapes) {
  for (const char* name : {"zbh1", "zbh2"}) {
    auto s = GenerateComputeOrder(name, Spec(2, 4, 2));
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(s.status().message(),
              std::string("vpp: schedule ") + name + " places exactly 1 chunk(s) per rank, got 2");
  }
  // Called directly, without the registry's checks.
  auto direct = GenerateZbh1(Spec(0, 4, 1));
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(direct.status().message(), "pp: must be >= 1, got 0");
  direct = GenerateZbh2(Spec(2, 0, 1));
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(direct.status().message(), "microbatches: must be >= 1, got 0");
  direct = GenerateZbh2(Spec(2, 4, 2));
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(direct.status().code(), Code::kInvalidArgument);
}

TEST(ZeroBubbleRankOrderTest, ClampsWarmupAndLag) {
  EXPECT_EQ(RankText(ZeroBubbleRankOrder(1, 2, 0, -3)), "1F0 1B0 1W0 1F1 1B1 1W1");
  EXPECT_EQ(RankText(ZeroBubbleRankOrder(0, 2, 9, 9)), "0F0 0F1 0B0 0B1 0W0 0W1");
}

}  // namespace
}  // namespace pipecoord::schedules
