#include "coordinator/lease_board.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>

namespace pipecoord::coordinator {
namespace {

using Clock = LeaseBoard::Clock;

v1::Progress ProgressAt(int step) {
  v1::Progress p;
  p.set_job_id("job-1");
  p.set_step(step);
  return p;
}

TEST(LeaseBoard, RefusesAnIdNeverAddedOrRemoved) {
  LeaseBoard board;
  EXPECT_FALSE(board.Record("w1", Clock::now(), 1, nullptr));
  board.Add("w1");
  EXPECT_TRUE(board.Record("w1", Clock::now(), 1, nullptr));
  board.Remove("w1");
  EXPECT_FALSE(board.Record("w1", Clock::now(), 2, nullptr));
  EXPECT_TRUE(board.Take().empty());  // the beat recorded before the removal went with it
}

TEST(LeaseBoard, TakesEachWorkersLatestBeatOnce) {
  LeaseBoard board;
  board.Add("a");
  board.Add("b");
  const auto t0 = Clock::now();
  const v1::Progress p3 = ProgressAt(3), p4 = ProgressAt(4);
  ASSERT_TRUE(board.Record("a", t0, 100, &p3));
  ASSERT_TRUE(board.Record("b", t0 + std::chrono::milliseconds(1), 101, nullptr));
  ASSERT_TRUE(board.Record("a", t0 + std::chrono::milliseconds(2), 102, &p4));
  // A later beat with no progress keeps the pending progress and the time it arrived.
  ASSERT_TRUE(board.Record("a", t0 + std::chrono::milliseconds(3), 103, nullptr));
  EXPECT_EQ(board.pending(), 2u);
  std::vector<LeaseBoard::Beat> beats = board.Take();
  ASSERT_EQ(beats.size(), 2u);
  const LeaseBoard::Beat& a = beats[0].worker_id == "a" ? beats[0] : beats[1];
  const LeaseBoard::Beat& b = beats[0].worker_id == "a" ? beats[1] : beats[0];
  EXPECT_EQ(a.at, t0 + std::chrono::milliseconds(3));
  ASSERT_TRUE(a.progress.has_value());
  EXPECT_EQ(a.progress->step(), 4);
  EXPECT_EQ(a.recv_ns, 102);
  EXPECT_EQ(b.at, t0 + std::chrono::milliseconds(1));
  EXPECT_FALSE(b.progress.has_value());
  EXPECT_TRUE(board.Take().empty());
  EXPECT_EQ(board.pending(), 0u);
}

TEST(LeaseBoard, AnOlderBeatArrivingLateDoesNotShortenTheLease) {
  LeaseBoard board;
  board.Add("a");
  const auto t0 = Clock::now();
  ASSERT_TRUE(board.Record("a", t0 + std::chrono::seconds(1), 1, nullptr));
  ASSERT_TRUE(board.Record("a", t0, 2, nullptr));
  std::vector<LeaseBoard::Beat> beats = board.Take();
  ASSERT_EQ(beats.size(), 1u);
  EXPECT_EQ(beats[0].at, t0 + std::chrono::seconds(1));
}

TEST(LeaseBoard, ManyThreadsBeatWhileOneTakes) {
  LeaseBoard board;
  constexpr int kWorkers = 64, kBeats = 200;
  for (int w = 0; w < kWorkers; ++w) board.Add("w" + std::to_string(w));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kBeats; ++k) {
        for (int w = t; w < kWorkers; w += 4) ASSERT_TRUE(board.Record("w" + std::to_string(w), Clock::now(), k, nullptr));
      }
    });
  }
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    for (const LeaseBoard::Beat& b : board.Take()) seen.insert(b.worker_id);
  }
  for (auto& t : threads) t.join();
  for (const LeaseBoard::Beat& b : board.Take()) seen.insert(b.worker_id);
  EXPECT_EQ(seen.size(), static_cast<size_t>(kWorkers));  // every worker's beat reached the core
}

}  // namespace
}  // namespace pipecoord::coordinator
