// The V schedules (zbv, v-half, v-min, dualpipev): exact orders for small cases and the
// figures each one promises, at f = b = w = 1 (t = 3, a chunk pass 0.5) and comm = 0.
// Peaks are in rank shares (one chunk's activations = 0.5), w_share = 0.5 unless said.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "schedules/test_util.h"

namespace pipecoord::schedules {
namespace {

using testing::MustGenerate;
using testing::MustSimulate;
using testing::RankText;
using testing::Spec;

std::vector<std::string> Orders(const std::string& name, int p, int m) {
  std::vector<std::string> out;
  for (const auto& list : MustGenerate(name, Spec(p, m)).ranks) out.push_back(RankText(list));
  return out;
}

// What a worker runs (communication included), timed.
Simulation Step(const std::string& name, int p, int m, CostModel c = {}) {
  auto s = BuildSchedule(name, Spec(p, m));
  EXPECT_TRUE(s.ok()) << name << " p=" << p << " m=" << m << ": " << s.status().ToString();
  return s.ok() ? MustSimulate(*s, c) : Simulation{};
}

std::vector<double> Peaks(const Simulation& sim) {
  std::vector<double> out;
  for (const RankStats& r : sim.ranks) out.push_back(r.peak_activations);
  return out;
}

double MaxPeak(const Simulation& sim) {
  double out = 0;
  for (const RankStats& r : sim.ranks) out = std::max(out, r.peak_activations);
  return out;
}

// ---- Exact orders, p = 2, m = 4, derived by hand from each schedule's rules. ----

TEST(ZbvTest, ExactOrderP2M4) {
  // Rank 0: 2p-1 = 3 forwards down, p = 2 x (F B W) on the way back, the steady F B W pairs,
  // then the last B's each with its W. Rank 1 (the turn): 1 forward, a (F1, F0) pair, one
  // F B W on stage 2, the steady state, then (B0, B1) with W's deferred to the end.
  EXPECT_EQ(Orders("zbv", 2, 4),
            (std::vector<std::string>{
                "0F0 0F1 0F2 3F0 3B0 3W0 3F1 3B1 3W1 0F3 0B0 0W0 3F2 3B2 3W2 0B1 0W1 3F3 3B3 3W3 "
                "0B2 0W2 0B3 0W3",
                "1F0 2F0 1F1 2F1 2B0 2W0 1F2 1B0 1W0 2F2 2B1 2W1 1F3 1B1 1W1 2F3 2B2 2W2 1B2 2B3 "
                "1B3 1W2 2W3 1W3"}));
}

TEST(DualPipeVTest, ExactOrderP2M4) {
  // Rank 0 (r = 0): phases 1..8 are 0F0 0F1 | 0F2 3F0 | 3B0 3W0 3F1 | 0F3 3B1 3W1 3F2 0B0 0W0 |
  // 3B2 3W2 3F3 0B1 0W1 | 3B3 3W3 0B2 (W deferred from here) | 0W2 0B3 | 0W3.
  EXPECT_EQ(Orders("dualpipev", 2, 4),
            (std::vector<std::string>{
                "0F0 0F1 0F2 3F0 3B0 3W0 3F1 0F3 3B1 3W1 3F2 0B0 0W0 3B2 3W2 3F3 0B1 0W1 3B3 3W3 "
                "0B2 0W2 0B3 0W3",
                "1F0 2F0 1F1 2F1 1F2 2B0 2W0 2F2 1B0 1W0 1F3 2B1 2W1 2F3 1B1 1W1 2B2 2W2 1B2 1W2 "
                "2B3 1B3 2W3 1W3"}));
}

TEST(VMinTest, ExactOrderP2M4) {
  // The block for p = 2 (slots): rank 0 F0 at 0, F1 at 3, B1 at 4, B0 at 7; rank 1 at 1, 2,
  // 5, 6; period 6, W's in the free slots. Squeezing changes nothing here: the order is the
  // block's, one micro-batch of chunk 0 in flight on rank 0 beside the one on chunk 1.
  EXPECT_EQ(Orders("v-min", 2, 4),
            (std::vector<std::string>{
                "0F0 3F0 3B0 3W0 0F1 0B0 0W0 3F1 3B1 3W1 0F2 0B1 0W1 3F2 3B2 3W2 0F3 0B2 0W2 3F3 "
                "3B3 3W3 0B3 0W3",
                "1F0 2F0 2B0 1B0 1F1 2F1 2W0 1W0 2B1 1B1 1F2 2F2 2W1 1W1 2B2 1B2 1F3 2F3 2W2 1W2 "
                "2B3 1B3 2W3 1W3"}));
}

TEST(VHalfTest, ExactOrderP2M4) {
  // The block for p = 2 (g = 3): rank 0 F0 at 0, F1 at 4, B1 at 8, B0 at 13; rank 1 at 2, 3,
  // 10, 11. Squeezed, rank 0 runs three chunk-0 forwards before the first comes back.
  EXPECT_EQ(Orders("v-half", 2, 4),
            (std::vector<std::string>{
                "0F0 0F1 0F2 3F0 3B0 3W0 3F1 3B1 0B0 3W1 0W0 3F2 0F3 3B2 0B1 3W2 0W1 3F3 3B3 0B2 "
                "3W3 0B3 0W2 0W3",
                "1F0 2F0 1F1 2F1 2B0 1B0 2W0 2B1 1F2 2F2 1B1 1W0 2W1 2B2 1F3 2F3 1B2 1W1 2B3 1B3 "
                "2W2 1W2 2W3 1W3"}));
}

// ---- Exact orders, p = 4 (the papers' figures use 4 ranks). ----

TEST(ZbvTest, ExactOrderP4M8) {
  // As the ZB-V figure: rank 0 starts with 2p-1 = 7 forwards; rank 3 (the turn) alternates
  // its two chunks; in the cool-down every rank runs its B's first and its W's last.
  EXPECT_EQ(Orders("zbv", 4, 8),
            (std::vector<std::string>{
                "0F0 0F1 0F2 0F3 0F4 0F5 0F6 7F0 7B0 7W0 7F1 7B1 7W1 7F2 7B2 7W2 7F3 7B3 7W3 0F7 "
                "0B0 0W0 7F4 7B4 7W4 0B1 0W1 7F5 7B5 7W5 0B2 0W2 7F6 7B6 7W6 0B3 0W3 7F7 7B7 7W7 "
                "0B4 0W4 0B5 0W5 0B6 0W6 0B7 0W7",
                "1F0 1F1 1F2 1F3 1F4 6F0 1F5 6F1 6B0 6W0 6F2 6B1 6W1 6F3 6B2 6W2 1F6 1B0 1W0 6F4 "
                "6B3 6W3 1F7 1B1 1W1 6F5 6B4 6W4 1B2 1W2 6F6 6B5 6W5 1B3 1W3 6F7 6B6 6W6 1B4 6B7 "
                "1B5 1W4 1B6 1W5 1B7 1W6 6W7 1W7",
                "2F0 2F1 2F2 5F0 2F3 5F1 2F4 5F2 5B0 5W0 5F3 5B1 5W1 2F5 2B0 2W0 5F4 5B2 5W2 2F6 "
                "2B1 2W1 5F5 5B3 5W3 2F7 2B2 2W2 5F6 5B4 5W4 2B3 2W3 5F7 5B5 5W5 2B4 5B6 2B5 5B7 "
                "2B6 2W4 2B7 2W5 5W6 5W7 2W6 2W7",
                "3F0 4F0 3F1 4F1 3F2 4F2 3F3 4F3 4B0 4W0 3F4 3B0 3W0 4F4 4B1 4W1 3F5 3B1 3W1 4F5 "
                "4B2 4W2 3F6 3B2 3W2 4F6 4B3 4W3 3F7 3B3 3W3 4F7 4B4 4W4 3B4 4B5 3B5 4B6 3B6 4B7 "
                "3B7 3W4 4W5 4W6 4W7 3W5 3W6 3W7"}));
}

TEST(VHalfTest, ExactOrderP4M8) {
  // Rank 0 fills the way down with 5 forwards (the block has one every 6 slots; the squeeze
  // pulls them forward up to the block's peak of 3 rank shares).
  EXPECT_EQ(Orders("v-half", 4, 8),
            (std::vector<std::string>{
                "0F0 0F1 0F2 0F3 0F4 7F0 7B0 7W0 7F1 7B1 7W1 7F2 7B2 7W2 0B0 0W0 0F5 7F3 7B3 7W3 "
                "0B1 0W1 0F6 7F4 7B4 7W4 0B2 0W2 0F7 7F5 7B5 7W5 0B3 0W3 7F6 7B6 7W6 0B4 0W4 7F7 "
                "7B7 0B5 7W7 0B6 0W5 0W6 0B7 0W7",
                "1F0 1F1 1F2 1F3 6F0 6F1 6B0 6W0 6F2 6B1 6W1 1F4 1B0 6B2 1W0 6F3 6W2 1F5 1B1 6B3 "
                "1W1 6F4 6W3 1F6 1B2 6B4 1W2 6F5 6W4 1F7 1B3 6B5 1W3 6F6 6W5 1B4 6B6 1W4 6F7 6W6 "
                "1B5 6B7 1B6 1W5 6W7 1W6 1B7 1W7",
                "2F0 2F1 2F2 5F0 5F1 5F2 5B0 5W0 2F3 5B1 2B0 5W1 2W0 5F3 2F4 5B2 2B1 5W2 2W1 5F4 "
                "2F5 5B3 2B2 5W3 2W2 5F5 2F6 5B4 2B3 5W4 2W3 5F6 2F7 5B5 2B4 5W5 2W4 5F7 5B6 2B5 "
                "5W6 2B6 5B7 2W5 2W6 2B7 5W7 2W7",
                "3F0 4F0 3F1 4F1 3F2 4F2 4B0 3B0 4W0 4B1 3F3 4F3 3B1 3W0 4W1 4B2 3F4 4F4 3B2 3W1 "
                "4W2 4B3 3F5 4F5 3B3 3W2 4W3 4B4 3F6 4F6 3B4 3W3 4W4 4B5 3F7 4F7 3B5 3W4 4B6 3B6 "
                "4W5 3W5 4B7 3B7 4W6 3W6 4W7 3W7"}));
}

TEST(VMinTest, ExactOrderP4M8) {
  // Rank 0 never holds more than 3 chunk-0 micro-batches; in the steady state each rank runs
  // F B W on both chunks in the block's order (rank 3: F0 F1 B1 B0 W W).
  EXPECT_EQ(Orders("v-min", 4, 8),
            (std::vector<std::string>{
                "0F0 0F1 0F2 7F0 7B0 7W0 7F1 7B1 0B0 7W1 0W0 0F3 7F2 7B2 0B1 7W2 0W1 0F4 7F3 7B3 "
                "0B2 7W3 0W2 0F5 7F4 7B4 0B3 7W4 0W3 0F6 7F5 7B5 0B4 7W5 0W4 0F7 7F6 7B6 0B5 7W6 "
                "0W5 7F7 7B7 0B6 7W7 0W6 0B7 0W7",
                "1F0 1F1 1F2 6F0 6B0 6W0 6F1 1B0 6B1 1W0 6W1 6F2 1F3 1B1 6B2 1W1 6W2 6F3 1F4 1B2 "
                "6B3 1W2 6W3 6F4 1F5 1B3 6B4 1W3 6W4 6F5 1F6 1B4 6B5 1W4 6W5 6F6 1F7 1B5 6B6 1W5 "
                "6W6 6F7 1B6 6B7 1W6 6W7 1B7 1W7",
                "2F0 2F1 5F0 5B0 5F1 5W0 2B0 2F2 2W0 5B1 5F2 5W1 2B1 2F3 2W1 5B2 5F3 5W2 2B2 2F4 "
                "2W2 5B3 5F4 5W3 2B3 2F5 2W3 5B4 5F5 5W4 2B4 2F6 2W4 5B5 5F6 5W5 2B5 2F7 2W5 5B6 "
                "5F7 5W6 2B6 2W6 5B7 5W7 2B7 2W7",
                "3F0 4F0 3F1 4F1 4B0 3B0 4W0 3W0 3F2 4F2 4B1 3B1 4W1 3W1 3F3 4F3 4B2 3B2 4W2 3W2 "
                "3F4 4F4 4B3 3B3 4W3 3W3 3F5 4F5 4B4 3B4 4W4 3W4 3F6 4F6 4B5 3B5 4W5 3W5 3F7 4F7 "
                "4B6 3B6 4W6 3W6 4B7 3B7 4W7 3W7"}));
}

TEST(DualPipeVTest, ExactOrderP4M10) {
  // The README's DualPipeV figure: 4 ranks, 10 micro-batches. Each (F, B+W) pair of phases 4
  // and 5 is one overlapped F&B cell there.
  EXPECT_EQ(Orders("dualpipev", 4, 10),
            (std::vector<std::string>{
                "0F0 0F1 0F2 0F3 0F4 0F5 0F6 7F0 7B0 7W0 7F1 7B1 7W1 7F2 7B2 7W2 7F3 0F7 7B3 7W3 "
                "7F4 0B0 0W0 0F8 7B4 7W4 7F5 0B1 0W1 0F9 7B5 7W5 7F6 0B2 0W2 7B6 7W6 7F7 0B3 0W3 "
                "7B7 7W7 7F8 0B4 0W4 7B8 7W8 7F9 0B5 0W5 7B9 7W9 0B6 0W6 0B7 0W7 0B8 0W8 0B9 0W9",
                "1F0 1F1 1F2 1F3 1F4 6F0 1F5 6F1 6B0 6W0 6F2 6B1 6W1 6F3 1F6 6B2 6W2 6F4 1B0 1W0 "
                "1F7 6B3 6W3 6F5 1B1 1W1 1F8 6B4 6W4 6F6 1B2 1W2 1F9 6B5 6W5 6F7 1B3 1W3 6B6 6W6 "
                "6F8 1B4 1W4 6B7 6W7 6F9 1B5 1W5 6B8 6W8 1B6 1W6 6B9 1B7 6W9 1B8 1W7 1B9 1W8 1W9",
                "2F0 2F1 2F2 5F0 2F3 5F1 2F4 5F2 5B0 5W0 5F3 2F5 5B1 5W1 5F4 2B0 2W0 2F6 5B2 5W2 "
                "5F5 2B1 2W1 2F7 5B3 5W3 5F6 2B2 2W2 2F8 5B4 5W4 5F7 2B3 2W3 2F9 5B5 5W5 5F8 2B4 "
                "2W4 5B6 5W6 5F9 2B5 2W5 5B7 5W7 2B6 2W6 5B8 5W8 2B7 5B9 2B8 2W7 2B9 5W9 2W8 2W9",
                "3F0 4F0 3F1 4F1 3F2 4F2 3F3 4F3 3F4 4B0 4W0 4F4 3B0 3W0 3F5 4B1 4W1 4F5 3B1 3W1 "
                "3F6 4B2 4W2 4F6 3B2 3W2 3F7 4B3 4W3 4F7 3B3 3W3 3F8 4B4 4W4 4F8 3B4 3W4 3F9 4B5 "
                "4W5 4F9 3B5 3W5 4B6 4W6 3B6 3W6 4B7 4W7 3B7 3W7 4B8 3B8 4B9 3B9 4W8 3W8 4W9 3W9"}));
}

// ---- Figures. ----

// ZB-V's promise: with m >= 2p every rank is busy from its first action to its last (span
// m t), rank r starts r chunk forwards after rank 0, and every rank peaks at p rank shares,
// 1F1B's rank-0 peak.
TEST(ZbvTest, ZeroBubbleSpanAndOneFOneBPeak) {
  for (int p = 2; p <= 16; ++p) {
    const double one_f_one_b_peak = MustSimulate(MustGenerate("1f1b", Spec(p, 2 * p)), {}).ranks[0].peak_activations;
    ASSERT_DOUBLE_EQ(one_f_one_b_peak, p);
    for (int m = 2 * p; m <= 4 * p; ++m) {
      Simulation sim = Step("zbv", p, m);
      ASSERT_EQ(sim.ranks.size(), static_cast<size_t>(p));
      for (int r = 0; r < p; ++r) {
        const RankStats& st = sim.ranks[r];
        EXPECT_DOUBLE_EQ(st.last_end - st.first_start, 3.0 * m) << "p=" << p << " m=" << m << " r=" << r;
        EXPECT_DOUBLE_EQ(st.first_start, 0.5 * r) << "p=" << p << " m=" << m << " r=" << r;
        EXPECT_DOUBLE_EQ(st.peak_activations, p) << "p=" << p << " m=" << m << " r=" << r;
        EXPECT_LE(st.peak_activations, one_f_one_b_peak);
      }
      EXPECT_DOUBLE_EQ(sim.makespan, 3.0 * m + 0.5 * (p - 1)) << "p=" << p << " m=" << m;
      EXPECT_NEAR(sim.rank_span_bubble_rate, 0.0, 1e-12);
    }
  }
}

TEST(ZbvTest, FewerThanTwoPMicroBatchesStillRunWithBubbles) {
  // The pattern runs on 2p-1 micro-batches and drops the padding: valid, but each rank r then
  // holds fewer and waits more. The padded order alone takes spans 15, 14, 13, 12 (p = 4,
  // m = 4, against m t = 12); its replay (cost_replay.h) moves W's into the waits: 13.5, 13,
  // 12.5, 12 within the same peaks.
  Simulation sim = Step("zbv", 4, 4);
  EXPECT_DOUBLE_EQ(sim.makespan, 13.5);
  std::vector<double> spans;
  for (const RankStats& r : sim.ranks) spans.push_back(r.last_end - r.first_start);
  EXPECT_EQ(spans, (std::vector<double>{13.5, 13, 12.5, 12}));
  EXPECT_EQ(Peaks(sim), (std::vector<double>{2.5, 3, 3.5, 4}));
  for (int m = 1; m < 8; ++m) Step("zbv", 4, m);  // builds and finishes
}

TEST(VHalfTest, PeaksAndStepTimeSmallCases) {
  EXPECT_EQ(Peaks(Step("v-half", 2, 4)), (std::vector<double>{2, 2}));
  EXPECT_EQ(Peaks(Step("v-half", 4, 8)), (std::vector<double>{3, 3, 3, 3}));
  EXPECT_EQ(Peaks(Step("v-half", 8, 16)), std::vector<double>(8, 5.0));
  EXPECT_DOUBLE_EQ(Step("v-half", 2, 4).makespan, 12.5);
  EXPECT_DOUBLE_EQ(Step("v-half", 4, 8).makespan, 26.5);
  EXPECT_DOUBLE_EQ(Step("v-half", 8, 16).makespan, 56.5);
}

TEST(VMinTest, PeaksAndStepTimeSmallCases) {
  EXPECT_EQ(Peaks(Step("v-min", 2, 4)), (std::vector<double>{1, 1.5}));
  EXPECT_EQ(Peaks(Step("v-min", 4, 8)), (std::vector<double>{2, 2, 1.75, 2}));
  EXPECT_EQ(Peaks(Step("v-min", 8, 16)), (std::vector<double>{3, 3.5, 3.5, 3, 3.5, 3.5, 3, 3.5}));
  EXPECT_DOUBLE_EQ(Step("v-min", 2, 4).makespan, 13.5);
  EXPECT_DOUBLE_EQ(Step("v-min", 4, 8).makespan, 29.5);
  EXPECT_DOUBLE_EQ(Step("v-min", 8, 16).makespan, 61.5);
}

// The step's bubble (makespan - m t) depends on p only, once m >= p: the block repeats.
TEST(VHalfTest, BubbleByPipelineDepth) {
  const double bubble[] = {0, 0, 0.5, 2.5, 2.5, 5.5, 5.5, 8.5, 8.5};  // by p; 0, 1 unused
  for (int p = 2; p <= 8; ++p) {
    for (int m = p; m <= 4 * p; ++m) {
      EXPECT_DOUBLE_EQ(Step("v-half", p, m).makespan - 3.0 * m, bubble[p]) << "p=" << p << " m=" << m;
    }
  }
}

TEST(VMinTest, BubbleByPipelineDepth) {
  const double bubble[] = {0, 0, 1.5, 2.5, 5.5, 7.5, 8.5, 11.5, 13.5};  // by p; 0, 1 unused
  for (int p = 2; p <= 8; ++p) {
    for (int m = p; m <= 4 * p; ++m) {
      EXPECT_DOUBLE_EQ(Step("v-min", p, m).makespan - 3.0 * m, bubble[p]) << "p=" << p << " m=" << m;
    }
  }
}

// The paper's memory bounds, in micro-batches of a rank's share: V-Half (p+2)//2 (half of
// 1F1B's p, plus one), V-Min (p+4)//3 (a third, plus one). The paper counts activations live
// until W (w_share = 1); there the bound is reached exactly. With B freeing half (w_share =
// 0.5) the peaks can only be lower.
TEST(VHalfTest, PeakIsHalfOfOneFOneBPlusOne) {
  for (int p = 2; p <= 16; ++p) {
    for (int m = p; m <= 4 * p; ++m) EXPECT_LE(MaxPeak(Step("v-half", p, m)), (p + 2) / 2) << "p=" << p << " m=" << m;
    CostModel paper;
    paper.w_share = 1;
    ScheduleSpec spec = Spec(p, 2 * p);
    spec.costs = paper;
    auto s = BuildSchedule("v-half", spec);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_DOUBLE_EQ(MaxPeak(MustSimulate(*s, paper)), (p + 2) / 2) << "p=" << p;
  }
}

TEST(VMinTest, PeakIsAThirdOfOneFOneBPlusOne) {
  for (int p = 2; p <= 16; ++p) {
    for (int m = p; m <= 4 * p; ++m) EXPECT_LE(MaxPeak(Step("v-min", p, m)), (p + 4) / 3) << "p=" << p << " m=" << m;
    CostModel paper;
    paper.w_share = 1;
    ScheduleSpec spec = Spec(p, 2 * p);
    spec.costs = paper;
    auto s = BuildSchedule("v-min", spec);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_DOUBLE_EQ(MaxPeak(MustSimulate(*s, paper)), (p + 4) / 3) << "p=" << p;
  }
}

// Less memory costs time: zbv (p shares) < v-half (about p/2) < v-min (about p/3) in step
// time, and the other way round in peak. Strict from p = 4 on; at p = 3 v-half and v-min tie
// (both 2.5 over m t) and at p = 2 v-half ties zbv.
TEST(VSchedulesTest, MemoryBuysTime) {
  for (int p = 4; p <= 12; ++p) {
    for (int m : {2 * p, 3 * p, 4 * p}) {
      Simulation zbv = Step("zbv", p, m), half = Step("v-half", p, m), min = Step("v-min", p, m);
      EXPECT_LT(zbv.makespan, half.makespan) << "p=" << p << " m=" << m;
      EXPECT_LT(half.makespan, min.makespan) << "p=" << p << " m=" << m;
      EXPECT_LE(MaxPeak(min), MaxPeak(half)) << "p=" << p << " m=" << m;
      EXPECT_LT(MaxPeak(half), MaxPeak(zbv)) << "p=" << p << " m=" << m;
    }
  }
}

// DualPipeV here: every rank ends together at m t + (p-1) f/2 (ZB-V's step time: without the
// F&B overlap our IR cannot show DualPipe's gain) and peaks at 2p+1 chunk activations, half a
// rank share more than ZB-V.
TEST(DualPipeVTest, StepTimeAndPeak) {
  for (int p = 1; p <= 16; ++p) {
    for (int m = 2 * p; m <= 4 * p; ++m) {
      Simulation sim = Step("dualpipev", p, m);
      ASSERT_EQ(sim.ranks.size(), static_cast<size_t>(p));
      EXPECT_DOUBLE_EQ(sim.makespan, 3.0 * m + 0.5 * (p - 1)) << "p=" << p << " m=" << m;
      for (int r = 0; r < p; ++r) {
        const RankStats& st = sim.ranks[r];
        EXPECT_DOUBLE_EQ(st.last_end - st.first_start, 3.0 * m + 0.5 * (p - 1 - r)) << "p=" << p << " m=" << m;
        EXPECT_DOUBLE_EQ(st.peak_activations, p + 0.5) << "p=" << p << " m=" << m << " r=" << r;
      }
    }
  }
}

// ---- Shapes at the edges and refusals. ----

TEST(VSchedulesTest, OneRankRunsBothChunksInTurn) {
  EXPECT_EQ(Orders("zbv", 1, 2), (std::vector<std::string>{"0F0 1F0 1B0 1W0 0F1 0B0 0W0 1F1 1B1 1W1 0B1 0W1"}));
  EXPECT_EQ(Orders("v-half", 1, 2), (std::vector<std::string>{"0F0 1F0 1B0 0B0 1W0 0W0 0F1 1F1 1B1 0B1 1W1 0W1"}));
  EXPECT_EQ(Orders("v-min", 1, 2), Orders("v-half", 1, 2));
  EXPECT_EQ(Orders("dualpipev", 1, 2), (std::vector<std::string>{"0F0 1F0 0F1 1B0 1W0 1F1 0B0 0W0 1B1 1W1 0B1 0W1"}));
  for (const char* name : {"zbv", "v-half", "v-min"}) {
    for (int m = 1; m <= 3; ++m) EXPECT_DOUBLE_EQ(Step(name, 1, m).makespan, 3.0 * m) << name << " m=" << m;
  }
}

TEST(VSchedulesTest, FewerMicroBatchesThanRanksAreScheduled) {
  for (const char* name : {"zbv", "v-half", "v-min"}) {
    for (int m = 1; m < 8; ++m) EXPECT_TRUE(BuildSchedule(name, Spec(8, m)).ok()) << name << " m=" << m;
  }
}

TEST(DualPipeVTest, RefusesFewerThanTwoMicroBatchesPerRank) {
  auto s = GenerateComputeOrder("dualpipev", Spec(4, 7));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(s.status().message(), "microbatches: dualpipev needs at least 2 x pp = 8 micro-batches, got 7");
  EXPECT_FALSE(BuildSchedule("dualpipev", Spec(1, 1)).ok());
}

TEST(VSchedulesTest, RefuseAnythingButTwoChunks) {
  for (const char* name : {"zbv", "v-half", "v-min", "dualpipev"}) {
    auto s = GenerateComputeOrder(name, Spec(4, 8, 3));
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_EQ(s.status().message(),
              "vpp: schedule " + std::string(name) + " places exactly 2 chunk(s) per rank, got 3");
  }
}

}  // namespace
}  // namespace pipecoord::schedules
