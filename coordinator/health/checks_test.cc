// The memory, probe and hang checks on hand-made inputs: exact event texts, one event per
// episode, no event when healthy.
#include <gtest/gtest.h>

#include "coordinator/health/hang_check.h"
#include "coordinator/health/memory_check.h"
#include "coordinator/health/probe_check.h"
#include "kernels/cpu/known_answer_gemm.h"

namespace pipecoord::coordinator::health {
namespace {

constexpr int64_t kSec = 1'000'000'000;

TEST(MemoryCheck, OverBudgetOncePerEpisode) {
  MemoryCheck m(jobplan::HealthSettings(), {1 << 20, 2 << 20}, RankLayout::OfDegrees(2, 2, 1));
  EXPECT_FALSE(m.OnStep(1, 0, 2 << 20));  // at the budget is fine
  auto e = m.OnStep(3, 4, 3 << 20);        // rank 1 of replica 1
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), v1::MEMORY);
  EXPECT_EQ(e->rank(), 1);
  EXPECT_EQ(e->dp_rank(), 1);
  EXPECT_EQ(e->step(), 4);
  EXPECT_EQ(e->message(), "memory: rank 1 (dp 1) step 4: peak 3.00 MiB is over the plan's budget 2.00 MiB by 1.00 MiB");
  EXPECT_FALSE(m.OnStep(3, 5, 3 << 20));  // still over: same episode
  EXPECT_FALSE(m.OnStep(3, 6, 1 << 20));
  EXPECT_TRUE(m.OnStep(3, 7, 3 << 20));   // a new episode
}

TEST(MemoryCheck, NearTheDeviceLimit) {
  MemoryCheck m(jobplan::HealthSettings(), {0}, RankLayout::OfDegrees(1, 1, 1));
  m.SetDeviceMemory(0, 100 << 20);
  EXPECT_FALSE(m.OnStep(0, 0, 95 << 20));
  auto e = m.OnStep(0, 1, 96 << 20);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message(), "memory: rank 0 (dp 0) step 1: peak 96.00 MiB is above 95% of the device's 100.00 MiB");
}

TEST(ProbeCheck, KnownAnswerAndReplicas) {
  ProbeCheck p(3, {{8, 8, 8}}, RankLayout::OfDegrees(2, 2, 1));
  const uint64_t good = kernels::cpu::KnownAnswerChecksum(kernels::cpu::ProbeSeed(3, 5), {8, 8, 8});
  EXPECT_EQ(p.Expected(5, 0), good);
  EXPECT_FALSE(p.OnProbe(0, 5, good));
  EXPECT_FALSE(p.OnProbe(1, 5, good));
  auto e = p.OnProbe(2, 5, good ^ 1);  // rank 0 of replica 1
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), v1::SDC);
  EXPECT_EQ(e->rank(), 0);
  EXPECT_EQ(e->dp_rank(), 1);
  char want[256];
  std::snprintf(want, sizeof want,
                "sdc: rank 0 (dp 1) step 5: probe checksum 0x%016llx != known answer 0x%016llx (8x8x8 GEMM); "
                "replicas of rank 0: dp 0 0x%016llx (agrees)",
                static_cast<unsigned long long>(good ^ 1), static_cast<unsigned long long>(good),
                static_cast<unsigned long long>(good));
  EXPECT_EQ(e->message(), want);
  EXPECT_FALSE(p.OnProbe(2, 6, 0));  // same episode
  EXPECT_EQ(p.probes_checked(), 4);
}

// The message says what the checksum was compared with: with dp 2 the known answer and the
// other replica's report; with dp 1 the known answer only (there is no replica).
TEST(ProbeCheck, TheMessageNamesWhatWasCompared) {
  const uint64_t good = kernels::cpu::KnownAnswerChecksum(kernels::cpu::ProbeSeed(3, 5), {8, 8, 8});
  char want[512];
  {
    ProbeCheck dp1(3, {{8, 8, 8}}, RankLayout::OfDegrees(2, 1, 1));
    EXPECT_FALSE(dp1.OnProbe(0, 5, good));
    auto e = dp1.OnProbe(1, 5, good ^ 4);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->rank(), 1);
    EXPECT_EQ(e->dp_rank(), 0);
    std::snprintf(want, sizeof want,
                  "sdc: rank 1 (dp 0) step 5: probe checksum 0x%016llx != known answer 0x%016llx (8x8x8 GEMM); "
                  "compared with the known answer only: the job has one replica (dp 1), none to compare rank 1 with",
                  static_cast<unsigned long long>(good ^ 4), static_cast<unsigned long long>(good));
    EXPECT_EQ(e->message(), want);
  }
  {
    ProbeCheck dp2(3, {{8, 8, 8}}, RankLayout::OfDegrees(2, 2, 1));
    auto first = dp2.OnProbe(1, 5, good ^ 4);  // rank 1 of replica 0, before replica 1 reported
    ASSERT_TRUE(first);
    std::snprintf(want, sizeof want,
                  "sdc: rank 1 (dp 0) step 5: probe checksum 0x%016llx != known answer 0x%016llx (8x8x8 GEMM); "
                  "replicas of rank 1: none reported yet",
                  static_cast<unsigned long long>(good ^ 4), static_cast<unsigned long long>(good));
    EXPECT_EQ(first->message(), want);
    auto second = dp2.OnProbe(3, 5, good ^ 4);  // rank 1 of replica 1: the same wrong answer
    ASSERT_TRUE(second);
    std::snprintf(want, sizeof want,
                  "sdc: rank 1 (dp 1) step 5: probe checksum 0x%016llx != known answer 0x%016llx (8x8x8 GEMM); "
                  "replicas of rank 1: dp 0 0x%016llx (differs)",
                  static_cast<unsigned long long>(good ^ 4), static_cast<unsigned long long>(good),
                  static_cast<unsigned long long>(good ^ 4));
    EXPECT_EQ(second->message(), want);
  }
}

// Each pipeline rank is checked against its own stage's GEMM: the head's rank runs the vocabulary
// GEMM, the others the ffn one; a rank's correct answer for another shape is wrong for it.
TEST(ProbeCheck, EachRankAgainstItsOwnShape) {
  const kernels::cpu::ProbeShape ffn{128, 64, 192}, head{128, 64, 256};
  ProbeCheck p(3, {ffn, head}, RankLayout::OfDegrees(2, 1, 1));
  const uint64_t seed = kernels::cpu::ProbeSeed(3, 4);
  EXPECT_EQ(p.Expected(4, 0), kernels::cpu::KnownAnswerChecksum(seed, ffn));
  EXPECT_EQ(p.Expected(4, 1), kernels::cpu::KnownAnswerChecksum(seed, head));
  EXPECT_FALSE(p.OnProbe(0, 4, kernels::cpu::KnownAnswerChecksum(seed, ffn)));
  EXPECT_FALSE(p.OnProbe(1, 4, kernels::cpu::KnownAnswerChecksum(seed, head)));
  auto e = p.OnProbe(1, 5, kernels::cpu::KnownAnswerChecksum(kernels::cpu::ProbeSeed(3, 5), ffn));
  ASSERT_TRUE(e);
  EXPECT_NE(e->message().find("(128x64x256 GEMM)"), std::string::npos) << e->message();
}

// The replay probe: the same F twice must agree; a mismatch names the F, once per episode.
TEST(ProbeCheck, AReplayThatDisagreesIsAnSdcNamingTheForward) {
  ProbeCheck p(3, {{8, 8, 8}}, RankLayout::OfDegrees(2, 2, 1));
  v1::ProbeReplay r;
  r.set_stage(0);
  r.set_microbatch(1);
  r.set_original_checksum(0xabc);
  r.set_replay_checksum(0xabc);
  EXPECT_TRUE(p.OnReplay(2, 4, r).empty());
  r.set_replay_checksum(0xabd);
  auto events = p.OnReplay(2, 5, r);
  ASSERT_EQ(events.size(), 1u);
  const v1::HealthEvent* e = &events[0];
  EXPECT_EQ(e->kind(), v1::SDC);
  EXPECT_EQ(e->rank(), 0);
  EXPECT_EQ(e->dp_rank(), 1);
  EXPECT_EQ(e->step(), 5);
  EXPECT_EQ(e->message(),
            "sdc: rank 0 (dp 1) step 5: replay of F stage 0 micro-batch 1 gave 0x0000000000000abd where its run in "
            "the step gave 0x0000000000000abc: the same input and weights through deterministic kernels, so one of "
            "the two runs computed wrongly (a transient fault, or a unit that fails now and then)");
  EXPECT_TRUE(p.OnReplay(2, 6, r).empty());  // the same episode
  r.set_replay_checksum(0xabc);
  EXPECT_TRUE(p.OnReplay(2, 7, r).empty());
  r.set_replay_checksum(0);
  EXPECT_EQ(p.OnReplay(2, 8, r).size(), 1u);  // a new episode
  EXPECT_EQ(p.replays_checked(), 5);
}

// The seeded replay: every replica runs the same F on the same input; judged once all reported,
// the odd one out named (with two replicas that differ, both).
TEST(ProbeCheck, SeededReplaysAreComparedAcrossReplicas) {
  ProbeCheck p(3, {{8, 8, 8}}, RankLayout::OfDegrees(2, 3, 1));  // rank 1 of replicas 0, 1, 2: globals 1, 3, 5
  v1::ProbeReplay r;
  r.set_stage(1);
  r.set_microbatch(-2);
  r.set_seeded(true);
  r.set_replay_checksum(0x11);
  EXPECT_TRUE(p.OnReplay(1, 4, r).empty());
  EXPECT_TRUE(p.OnReplay(3, 4, r).empty());
  EXPECT_TRUE(p.OnReplay(5, 4, r).empty());  // all agree
  EXPECT_TRUE(p.OnReplay(1, 5, r).empty());
  r.set_replay_checksum(0x99);
  EXPECT_TRUE(p.OnReplay(3, 5, r).empty());  // judged when the last replica reports
  r.set_replay_checksum(0x11);
  auto events = p.OnReplay(5, 5, r);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].rank(), 1);
  EXPECT_EQ(events[0].dp_rank(), 1);
  EXPECT_EQ(events[0].message(),
            "sdc: rank 1 (dp 1) step 5: the seeded forward of stage 1 gave 0x0000000000000099, where the other "
            "replicas agree on another answer: the replicas run it on the same input and weights (dp 0 "
            "0x0000000000000011, dp 1 0x0000000000000099, dp 2 0x0000000000000011)");
  ProbeCheck two(3, {{8, 8, 8}}, RankLayout::OfDegrees(1, 2, 1));
  r.set_replay_checksum(0x1);
  EXPECT_TRUE(two.OnReplay(0, 2, r).empty());
  r.set_replay_checksum(0x2);
  EXPECT_EQ(two.OnReplay(1, 2, r).size(), 2u);  // no majority: both named
}

v1::Progress At(int step, int index, v1::Op op, int stage, int mb, int wait_peer) {
  v1::Progress p;
  p.set_step(step);
  p.set_action_index(index);
  p.mutable_action()->set_op(op);
  p.mutable_action()->set_stage(stage);
  p.mutable_action()->set_microbatch(mb);
  p.set_waiting(wait_peer >= 0);
  p.set_wait_peer(wait_peer);
  return p;
}

TEST(HangCheck, NamesTheRankAtTheEndOfTheWaitChain) {
  jobplan::HealthSettings s;
  s.hang_floor_s = 1;
  HangCheck h(s, RankLayout::OfDegrees(3, 1, 1), 100, 0);
  EXPECT_EQ(h.Deadline(0), 60);       // before calibration: the startup deadline
  EXPECT_EQ(h.Deadline(0.1), 1);      // the floor
  EXPECT_EQ(h.Deadline(0.5), 2.5);    // 5 predicted steps
  h.OnProgress(0, At(6, 7, v1::BW, 0, 0, 1), 1 * kSec);  // rank 0 waits for rank 1
  h.OnProgress(1, At(6, 4, v1::B, 1, 0, 2), 1 * kSec);   // rank 1 waits for rank 2
  h.OnProgress(2, At(6, 2, v1::F, 2, 1, -1), kSec / 2);  // rank 2 runs 2F1 and stops there
  EXPECT_FALSE(h.OnTick(kSec + kSec / 2, 0.1));
  auto e = h.OnTick(2 * kSec, 0.1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind(), v1::HANG);
  EXPECT_EQ(e->rank(), 2);
  EXPECT_EQ(e->step(), 6);
  EXPECT_EQ(e->message(),
            "hang: rank 2 (dp 0) is stuck at step 6 in 2F1: no progress for 1.50 s (deadline 1.00 s = max(floor 1.00 s, "
            "5 x predicted step 0.100 s)); last actions: rank 0 (dp 0) step 6 #7 0BW0 waiting for rank 1 (dp 0); "
            "rank 1 (dp 0) step 6 #4 1B0 waiting for rank 2 (dp 0); rank 2 (dp 0) step 6 #2 2F1 running");
  EXPECT_FALSE(h.OnTick(3 * kSec, 0.1));  // same episode
  h.OnProgress(2, At(6, 3, v1::F, 2, 1, -1), 3 * kSec);
  h.OnProgress(1, At(7, 0, v1::F, 1, 0, 0), 3 * kSec);
  h.OnProgress(0, At(7, 0, v1::F, 0, 0, -1), 3 * kSec);
  EXPECT_FALSE(h.OnTick(3 * kSec + kSec / 2, 0.1));  // progress again: the episode ends
}

// The coordinator's tick period at any lease (coordinator.h TickPeriod: at most 200 ms).
constexpr int64_t kTickNs = 200'000'000;

// One rank runs an action every 10 ms from t = 0 and stops at `stop_ns` (its last position
// change); the worker heartbeats every `heartbeat_ns` (lease / 3) with the Progress it holds
// then, arriving `hop_ns` later; the coordinator ticks every kTickNs. Returns when the HANG
// event came, or -1.
int64_t HangDetectedAt(int64_t heartbeat_ns, int64_t hop_ns, int64_t stop_ns, bool send_age = true) {
  HangCheck h(jobplan::HealthSettings(), RankLayout::OfDegrees(1, 1, 1), 1000, 0);  // defaults: deadline max(10 s, 5 x 0.1 s) = 10 s
  int64_t next_beat = heartbeat_ns, next_tick = kTickNs;
  while (next_tick < 60 * kSec) {
    if (next_beat + hop_ns <= next_tick) {
      const int64_t sent = next_beat, moved = std::min(sent, stop_ns) / 10'000'000 * 10'000'000;
      v1::Progress p = At(0, static_cast<int>(moved / 10'000'000), v1::F, 0, 0, -1);
      if (send_age) p.set_progress_age_ns(sent - moved);
      h.OnProgress(0, p, sent + hop_ns);
      next_beat += heartbeat_ns;
    } else {
      if (h.OnTick(next_tick, 0.1)) return next_tick;
      next_tick += kTickNs;
    }
  }
  return -1;
}

TEST(HangCheck, DatesProgressByItsAgeSoTheLeaseDoesNotDelayDetection) {
  // The rank last progressed at 3.2 s: seen at the first tick more than the 10 s deadline later
  // (13.4 s; 13.2 s is exactly 10 s, not more), at the default 5 s lease's 1.67 s heartbeats as at
  // 0.5 s or 3 s ones; a 1 ms hop moves it by at most one tick.
  for (int64_t beat : {kSec / 2, 5 * kSec / 3, 3 * kSec}) {
    EXPECT_EQ(HangDetectedAt(beat, 0, 3'200'000'000), 13'400'000'000) << beat;
    EXPECT_EQ(HangDetectedAt(beat, 1'000'000, 3'200'000'000), 13'400'000'000) << beat;
    EXPECT_EQ(HangDetectedAt(beat, 1'000'000, 3'150'000'000), 13'200'000'000) << beat;
  }
  // A worker that sends no age (progress_age_ns 0) is dated by arrival, as before: the last
  // change (3.2 s) arrives with the beat at 3.33 s at 1.67 s beats (seen at 13.4 s), with the
  // beat at 6 s at 3 s beats (seen at 16.2 s: the lag the age removes).
  EXPECT_EQ(HangDetectedAt(5 * kSec / 3, 0, 3'200'000'000, false), 13'400'000'000);
  EXPECT_EQ(HangDetectedAt(3 * kSec, 0, 3'200'000'000, false), 16'200'000'000);
}

TEST(HangCheck, AnAgeNeverDatesProgressBeforeTheRanksPreviousChange) {
  jobplan::HealthSettings s;
  s.hang_floor_s = 1;
  HangCheck h(s, RankLayout::OfDegrees(1, 1, 1), 100, 0);
  v1::Progress p = At(0, 1, v1::F, 0, 0, -1);
  p.set_progress_age_ns(100 * kSec);  // older than the job: dated at the job's start
  h.OnProgress(0, p, 2 * kSec);
  EXPECT_FALSE(h.OnTick(kSec, 0.1));
  ASSERT_TRUE(h.OnTick(kSec + 1, 0.1));
  p = At(0, 2, v1::F, 0, 0, -1);
  p.set_progress_age_ns(-kSec);  // from the future: dated at its arrival
  h.OnProgress(0, p, 3 * kSec);
  EXPECT_FALSE(h.OnTick(4 * kSec, 0.1));  // progress: the episode ended
  auto e = h.OnTick(4 * kSec + 1, 0.1);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message().find("no progress for 1.00 s (deadline 1.00 s"), std::string::npos) << e->message();
}

TEST(HangCheck, FinishedRanksNeverHang) {
  HangCheck h(jobplan::HealthSettings(), RankLayout::OfDegrees(1, 1, 1), 3, 0);
  h.OnStepReported(0, 2, kSec);
  EXPECT_FALSE(h.OnTick(1000 * kSec, 0.1));
}

}  // namespace
}  // namespace pipecoord::coordinator::health
