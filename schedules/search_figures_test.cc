// The figures of issue 16: pipecoord's schedules against the published schedulers of Qi et al.
// (Zero Bubble Pipeline Parallelism, ICLR 2024; Pipeline Parallelism with Controllable Memory,
// 2024; sail-sg/zero-bubble-pipeline-parallelism), whose figures were obtained by running their
// code and re-timing the result with this simulator. The measure is theirs: the longest rank
// span (first start to last end on one rank), comm 0 unless given, w_share 0.5 unless given,
// memory limits in micro-batches of one rank's activations.
//
// Each figure is asserted exactly (to 1e-6), so any change shows; where ours is at most the
// published one that is asserted too. docs/schedules.md's comparison table lists the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "schedules/comm_pass.h"
#include "schedules/memory_search.h"
#include "schedules/test_util.h"

namespace pipecoord::schedules {
namespace {

using testing::MustSimulate;

struct Setting {
  int p, m;
  double f, b, w, comm, w_share;
};

constexpr Setting kUnit8 = {8, 24, 1, 1, 1, 0, 0.5};
constexpr Setting kUneven16 = {16, 64, 1, 1.2, 0.8, 0, 0.5};
constexpr Setting kUnit16 = {16, 64, 1, 1, 1, 0, 0.5};
// The Zero Bubble paper's measured 1.5B-model setting: 8 stages, 24 micro-batches, F/B/W and
// one transfer in microseconds, W keeping 0.3664 of a stage's activations.
constexpr Setting kPaper = {8, 24, 18522, 18086, 9337, 601, 0.3664};

ScheduleSpec SpecOf(const Setting& s, double limit = 0) {
  ScheduleSpec spec = testing::Spec(s.p, s.m);
  spec.costs.f = s.f;
  spec.costs.b = s.b;
  spec.costs.w = s.w;
  spec.costs.comm = s.comm;
  spec.costs.w_share = s.w_share;
  spec.mem_limit = limit;
  return spec;
}

double LongestSpan(const Simulation& sim) {
  double span = 0;
  for (const RankStats& r : sim.ranks) span = std::max(span, r.last_end - r.first_start);
  return span;
}

// What a worker would run (generate, communication pass, validator), timed; its peak checked
// against the limit on every rank when one is given.
double Span(const std::string& name, const Setting& s, double limit = 0) {
  const ScheduleSpec spec = SpecOf(s, limit);
  auto built = BuildSchedule(name, spec);
  EXPECT_TRUE(built.ok()) << name << ": " << built.status().ToString();
  if (!built.ok()) return -1;
  const Simulation sim = MustSimulate(*built, spec.costs);
  for (int r = 0; r < s.p && limit > 0; ++r) EXPECT_LE(sim.ranks[r].peak_activations, limit) << name << " r" << r;
  return LongestSpan(sim);
}

// v-auto through its search (the registry may not list it): the compute order, then the same
// communication pass and validator as BuildSchedule.
double VAutoSpan(const Setting& s, double limit) {
  const ScheduleSpec spec = SpecOf(s, limit);
  auto found = SearchVAuto(spec);
  EXPECT_TRUE(found.ok()) << found.status().ToString();
  if (!found.ok()) return -1;
  auto full = AddCommunication(found->schedule, spec.costs);
  EXPECT_TRUE(full.ok()) << full.status().ToString();
  if (!full.ok()) return -1;
  EXPECT_TRUE(Validate(*full).ok());
  const Simulation sim = MustSimulate(*full, spec.costs);
  for (int r = 0; r < s.p; ++r) EXPECT_LE(sim.ranks[r].peak_activations, limit) << "v-auto r" << r;
  EXPECT_NEAR(LongestSpan(sim), found->span, 1e-9);
  return LongestSpan(sim);
}

constexpr double kExact = 1e-6;

// zb-auto, f = b = w = 1, p 8, m 24: 79 at every limit before (the makespan it minimised cannot
// go below m t + (p - 1) f = 79). Rank 0 waits p f + (p - 1) b = 15 for its first B and can run
// at most `limit` forwards meanwhile, so no schedule beats m t + 15 - limit: reached exactly.
TEST(SearchFiguresTest, ZbAutoUsesEveryBitOfMemory) {
  const double limits[] = {10, 12, 14, 16};
  const double published[] = {77, 75, 73, 72};
  const double ours[] = {77, 75, 73, 72};
  for (int i = 0; i < 4; ++i) {
    const double span = Span("zb-auto", kUnit8, limits[i]);
    EXPECT_NEAR(span, ours[i], kExact) << "limit " << limits[i];
    EXPECT_LE(span, published[i]) << "limit " << limits[i];
    EXPECT_GE(span, 72 + std::max(0.0, 15 - limits[i]) - kExact) << "below the bound, limit " << limits[i];
  }
}

// The bound holds at every limit from 1F1B's memory (8) to ZB-H2's, one time unit per unit of
// memory.
TEST(SearchFiguresTest, ZbAutoReachesTheBoundAtEveryLimit) {
  for (int limit = 8; limit <= 16; ++limit) {
    EXPECT_NEAR(Span("zb-auto", kUnit8, limit), 72 + std::max(0, 15 - limit), kExact) << "limit " << limit;
  }
}

// At 2p (ZB-H2's memory) zb-auto reaches ZB-H2's span, for even and uneven costs.
TEST(SearchFiguresTest, ZbAutoAtTwoPReachesZbh2) {
  for (int p : {2, 3, 4, 6, 8}) {
    for (Setting s : {Setting{p, 3 * p, 1, 1, 1, 0, 0.5}, Setting{p, 3 * p, 1, 1.2, 0.8, 0, 0.5},
                      Setting{p, 3 * p, 1, 1, 1, 0.2, 0.5}}) {
      const double zbh2 = Span("zbh2", s);
      EXPECT_LE(Span("zb-auto", s, 2 * p), zbh2 + kExact) << "p=" << p << " b=" << s.b << " comm=" << s.comm;
      if (s.b == 1 && s.comm == 0) {
        EXPECT_NEAR(zbh2, 3.0 * s.m, kExact);  // zero bubble
      }
    }
  }
}

// The Zero Bubble paper's setting at limit 16: ZB-2P (their heuristic at 2p) takes 1,152,599;
// so do we since the list scheduler balances idle time across ranks (balance_idle); 1,152,751
// before that, 1,182,130 before this search.
TEST(SearchFiguresTest, ZbAutoPaperSetting) {
  const double span = Span("zb-auto", kPaper, 16);
  EXPECT_NEAR(span, 1152599, kExact);
  EXPECT_LE(span, 1152599 + kExact);
}

// Below 1F1B's memory the search trades time for memory: at limit 4 (p 8) 115 against the
// published heuristic's 247.
TEST(SearchFiguresTest, ZbAutoBelowOneFOneBMemory) {
  const double span = Span("zb-auto", kUnit8, 4);
  EXPECT_NEAR(span, 115, kExact);
  EXPECT_LE(span, 247);
}

// v-auto, the V placement at limits 4 / 6 / 8: the published V-auto takes 83.5 / 77.5 / 72;
// ZB-V's memory is 8 (p), where v-auto keeps ZB-V's zero bubble.
TEST(SearchFiguresTest, VAutoMatchesPublishedVAuto) {
  const double limits[] = {4, 6, 8};
  const double published[] = {83.5, 77.5, 72};
  const double ours[] = {83.5, 77.5, 72};
  for (int i = 0; i < 3; ++i) {
    const double span = VAutoSpan(kUnit8, limits[i]);
    EXPECT_NEAR(span, ours[i], kExact) << "limit " << limits[i];
    EXPECT_LE(span, published[i]) << "limit " << limits[i];
  }
}

// v-half's memory: its block's peak on every rank (floor((p + 2) / 2) micro-batches of a rank's
// activations at p 16 and p 8), counted our way (B frees 1 - w_share, W the rest). The published
// V-Half order also holds exactly that on every rank in our accounting, so the comparison is at
// equal memory.
void ExpectVHalfPeaks(const Setting& s, double peak) {
  const ScheduleSpec spec = SpecOf(s);
  auto built = BuildSchedule("v-half", spec);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  const Simulation sim = MustSimulate(*built, spec.costs);
  for (int r = 0; r < s.p; ++r) EXPECT_NEAR(sim.ranks[r].peak_activations, peak, kExact) << "rank " << r;
}

// zbv and v-half time their orders with the real costs (cost_replay.h). p 16, m 64, f 1,
// b 1.2, w 0.8: zbv 198 before, 197.8 with the idle-balancing replay (published 197.8: met,
// equal); v-half 224.3 before, 219 with the replays, 218.8 with the published construction of
// the block as one more candidate (v_block_greedy.h; published 218.8: met, equal).
TEST(SearchFiguresTest, VSchedulesWithUnevenCosts) {
  const double v_half = Span("v-half", kUneven16);
  EXPECT_NEAR(v_half, 218.8, kExact);
  EXPECT_LE(v_half, 218.8 + kExact);
  ExpectVHalfPeaks(kUneven16, 9);
  const double zbv = Span("zbv", kUneven16);
  EXPECT_NEAR(zbv, 197.8, kExact);
  EXPECT_LE(zbv, 197.8 + kExact);
}

// The paper's setting: zbv 1,189,271 before, 1,186,022.5 now (published 1,186,022.5: met,
// equal); v-half 1,357,200 before, 1,331,529 with the replays, 1,328,771.5 with the published
// construction (published 1,328,771.5: met, equal), at 5 on every rank.
TEST(SearchFiguresTest, VSchedulesPaperSetting) {
  const double zbv = Span("zbv", kPaper);
  EXPECT_NEAR(zbv, 1186022.5, kExact);
  EXPECT_LE(zbv, 1186022.5 + kExact);
  const double v_half = Span("v-half", kPaper);
  EXPECT_NEAR(v_half, 1328771.5, kExact);
  EXPECT_LE(v_half, 1328771.5 + kExact);
  ExpectVHalfPeaks(kPaper, 5);
}

// Where pipecoord already won, it still does: dualpipev 199.5 (p 16, m 64, f = b = w = 1)
// against the published 207, and 1,208,946.5 against 1,295,409.5 in the paper's setting.
TEST(SearchFiguresTest, DualPipeVKeepsItsLead) {
  EXPECT_NEAR(Span("dualpipev", kUnit16), 199.5, kExact);
  EXPECT_NEAR(Span("dualpipev", kPaper), 1208946.5, kExact);
}

}  // namespace
}  // namespace pipecoord::schedules
