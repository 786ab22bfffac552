#include "worker/transport/allreduce.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "worker/transport/test_util.h"

namespace pipecoord::worker {
namespace {

using std::chrono::milliseconds;
using testing::MakeMesh;
using ::testing::HasSubstr;

constexpr milliseconds kLong(20000);

// Runs AllReduceSum on every member of `group` (indices into `mesh`) at once.
std::vector<Status> RunGroup(std::vector<std::unique_ptr<TcpTransport>>& mesh,
                             const std::vector<int>& group, int step,
                             std::vector<std::vector<float>>& data) {
  std::vector<Status> results(group.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < group.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = AllReduceSum(*mesh[group[i]], static_cast<int>(i), group, step, data[i], kLong);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

TEST(AllReduceTest, IntegersSumExactlyForTwoThreeAndFourMembers) {
  for (int n : {2, 3, 4}) {
    auto mesh = MakeMesh(n);
    ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
    std::vector<int> group(n);
    for (int i = 0; i < n; ++i) group[i] = i;
    int step = 0;
    // Lengths below n (empty chunks), not dividing by n, and large.
    for (size_t len : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{1000},
                       size_t{1001}, size_t{65537}}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " len=" + std::to_string(len));
      std::vector<std::vector<float>> data(n, std::vector<float>(len));
      for (int i = 0; i < n; ++i)
        for (size_t j = 0; j < len; ++j) data[i][j] = static_cast<float>((i + 1) * 100000 + j % 1000);
      for (const Status& s : RunGroup(*mesh, group, step++, data)) ASSERT_TRUE(s.ok()) << s.ToString();
      for (int i = 0; i < n; ++i) {
        for (size_t j = 0; j < len; ++j) {
          const float want = static_cast<float>(n * (n + 1) / 2 * 100000 + n * static_cast<int>(j % 1000));
          ASSERT_EQ(data[i][j], want) << "member " << i << " element " << j;
        }
      }
    }
  }
}

TEST(AllReduceTest, RandomFloatsAreBitIdenticalOnEveryMemberAndEveryRun) {
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto mesh = MakeMesh(n);
    ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
    std::vector<int> group(n);
    for (int i = 0; i < n; ++i) group[i] = i;
    constexpr size_t kLen = 10007;
    std::vector<std::vector<float>> input(n, std::vector<float>(kLen));
    for (int i = 0; i < n; ++i) {
      std::mt19937 rng(77 + i);
      std::normal_distribution<float> normal(0.f, 1.f);
      for (float& x : input[i]) x = normal(rng) * std::pow(10.f, static_cast<float>(rng() % 7) - 3);
    }
    std::vector<std::vector<float>> first = input;
    for (const Status& s : RunGroup(*mesh, group, 0, first)) ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<std::vector<float>> second = input;
    for (const Status& s : RunGroup(*mesh, group, 1, second)) ASSERT_TRUE(s.ok()) << s.ToString();
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(std::memcmp(first[i].data(), first[0].data(), kLen * 4), 0) << "member " << i;
      EXPECT_EQ(std::memcmp(second[i].data(), first[0].data(), kLen * 4), 0) << "member " << i;
    }
    for (size_t j = 0; j < kLen; ++j) {
      double sum = 0, magnitude = 0;
      for (int i = 0; i < n; ++i) {
        sum += input[i][j];
        magnitude += std::fabs(input[i][j]);
      }
      ASSERT_NEAR(first[0][j], sum, 1e-6 * magnitude) << "element " << j;
    }
  }
}

TEST(AllReduceTest, GroupOfOneIsANoOp) {
  auto mesh = MakeMesh(1);
  ASSERT_TRUE(mesh.ok());
  std::vector<float> data{1.5f, -2.f};
  EXPECT_TRUE(AllReduceSum(*(*mesh)[0], 0, {0}, 0, data, kLong).ok());
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.f}));
}

TEST(AllReduceTest, DisjointGroupsOfOneMeshRunAtOnce) {
  auto mesh = MakeMesh(4);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  // Groups {3, 1} and {0, 2} (ring order as listed), as two data-parallel groups would.
  const std::vector<std::vector<int>> groups = {{3, 1}, {0, 2}};
  std::vector<std::vector<float>> data(4, std::vector<float>(9));
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < 9; ++j) data[r][j] = static_cast<float>(r * 10 + j);
  std::vector<Status> results(4);
  std::vector<std::thread> threads;
  for (const auto& g : groups) {
    for (size_t i = 0; i < g.size(); ++i) {
      threads.emplace_back([&, g, i] {
        results[g[i]] = AllReduceSum(*(*mesh)[g[i]], static_cast<int>(i), g, 0, data[g[i]], kLong);
      });
    }
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) ASSERT_TRUE(s.ok()) << s.ToString();
  for (int j = 0; j < 9; ++j) {
    EXPECT_EQ(data[1][j], 40.f + 2 * j);
    EXPECT_EQ(data[3][j], 40.f + 2 * j);
    EXPECT_EQ(data[0][j], 20.f + 2 * j);
    EXPECT_EQ(data[2][j], 20.f + 2 * j);
  }
}

TEST(AllReduceTest, RejectsBadArguments) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok());
  std::vector<float> data(4);
  Transport& t = *(*mesh)[0];
  Status s = AllReduceSum(t, 2, {0, 1}, 0, data, kLong);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("my_index must be in 0..1"));
  s = AllReduceSum(t, 0, {0, 0}, 0, data, kLong);
  EXPECT_THAT(s.message(), HasSubstr("repeats a rank"));
  s = AllReduceSum(t, 0, {0, 1}, 0, data, kLong, /*channel=*/1);
  EXPECT_THAT(s.message(), HasSubstr("channel must be >= 2"));
  EXPECT_EQ(AllReduceSum(t, 0, {}, 0, data, kLong).code(), Code::kInvalidArgument);
}

TEST(AllReduceTest, MismatchedLengthsAreReported) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok());
  std::vector<std::vector<float>> data = {std::vector<float>(10), std::vector<float>(12)};
  std::vector<Status> results = RunGroup(*mesh, {0, 1}, 0, data);
  for (const Status& s : results) {
    EXPECT_EQ(s.code(), Code::kInternal);
    EXPECT_THAT(s.message(), HasSubstr("do all members pass the same data length?"));
  }
}

TEST(AllReduceTest, AMissingMemberTimesOutNamingTheRank) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok());
  std::vector<float> data(8, 1.f);
  Status s = AllReduceSum(*(*mesh)[0], 0, {0, 1}, 3, data, milliseconds(100));
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("AllReduceSum step 3 (member 0 of 2, rank 0): receiving "
                                     "chunk 1 in round 0 from rank 1"));
  EXPECT_THAT(s.message(), HasSubstr("timed out after"));
}

}  // namespace
}  // namespace pipecoord::worker
