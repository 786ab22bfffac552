#include "coordinator/attempt_outcome.h"

#include <gtest/gtest.h>

namespace pipecoord::coordinator {
namespace {

using Clock = AttemptOutcome::Clock;
using std::chrono::milliseconds;

TEST(AttemptOutcomeTest, ItSucceedsOnceEveryRankHas) {
  AttemptOutcome out(3);
  EXPECT_FALSE(out.Succeeded(0));
  EXPECT_FALSE(out.Succeeded(2));
  EXPECT_FALSE(out.reported(1));
  EXPECT_TRUE(out.Succeeded(1));
  EXPECT_TRUE(out.reported(1));
}

TEST(AttemptOutcomeTest, AFailureOfItsOwnIsTheRoot) {
  AttemptOutcome out(2);
  EXPECT_TRUE(out.Failed(1, "rank 1 (w1): out of memory", {}, Clock::now()));
  EXPECT_TRUE(out.reported(1));
  EXPECT_EQ(out.Overdue(Clock::now() + milliseconds(1000)), nullptr);
}

TEST(AttemptOutcomeTest, ABrokenLinkWaitsForThePeersOwnWord) {
  const Clock::time_point t0 = Clock::now(), deadline = t0 + milliseconds(100);
  AttemptOutcome out(4);
  EXPECT_FALSE(out.Failed(3, "rank 3: link to 2 broke", {2}, deadline));
  EXPECT_EQ(out.Overdue(t0), nullptr);  // within the grace
  // Another symptom changes nothing: rank 2's word is awaited.
  EXPECT_FALSE(out.Failed(0, "rank 0: link to 1 broke", {1}, deadline + milliseconds(50)));
  const AttemptOutcome::Suspicion* s = out.Overdue(deadline);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->suspect_global, 2);
  EXPECT_EQ(s->cause, "rank 3: link to 2 broke");
  // The suspect speaks, having lost 1: 1 is now the one to hear from.
  EXPECT_FALSE(out.Failed(2, "rank 2: link to 1 broke", {1}, deadline + milliseconds(100)));
  EXPECT_EQ(out.Overdue(deadline), nullptr);
  ASSERT_NE(out.Overdue(deadline + milliseconds(100)), nullptr);
  EXPECT_EQ(out.Overdue(deadline + milliseconds(100))->suspect_global, 1);
  // 1's own failure is the root.
  EXPECT_TRUE(out.Failed(1, "rank 1: CUDA error", {}, deadline));
}

TEST(AttemptOutcomeTest, TheChainEndsAtAPeerThatAlreadySpoke) {
  AttemptOutcome out(3);
  const Clock::time_point deadline = Clock::now();
  EXPECT_FALSE(out.Failed(2, "rank 2: link to 1 broke", {1}, deadline));
  // Rank 1 lost 2, which failed already: rank 1's report is the root.
  EXPECT_TRUE(out.Failed(1, "rank 1: link to 2 broke", {2}, deadline));
}

TEST(AttemptOutcomeTest, TheSuspectIsAPeerThatHasNotFailedAndImpossiblePeersAreIgnored) {
  AttemptOutcome out(4);
  const Clock::time_point deadline = Clock::now();
  EXPECT_TRUE(out.Failed(0, "rank 0: its own", {}, deadline));
  // Itself, out of range, or only failed peers after a live one: the live one is blamed.
  EXPECT_FALSE(out.Failed(2, "rank 2: lost peers", {2, -1, 9, 3, 0}, deadline));
  ASSERT_NE(out.Overdue(deadline), nullptr);
  EXPECT_EQ(out.Overdue(deadline)->suspect_global, 3);
  // Only impossible peers: its own failure.
  AttemptOutcome alone(2);
  EXPECT_TRUE(alone.Failed(1, "rank 1: lost peers", {1, 5, -3}, deadline));
}

}  // namespace
}  // namespace pipecoord::coordinator
