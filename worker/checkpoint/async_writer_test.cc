#include "worker/checkpoint/async_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace pipecoord::worker {
namespace {

std::string FreshDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/" + name +
                          "-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(AsyncCheckpointWriterTest, WritesTheStateAsItWasAtSaveAndReportsItDurableOnce) {
  const std::string dir = FreshDir("async");
  std::vector<float> w{1.f, 2.f, 3.f};
  AsyncCheckpointWriter writer(dir, "job-1", 3);
  ASSERT_TRUE(writer.Save({5, 6}, {{"w", w}}).ok());
  w.assign({9.f, 9.f, 9.f});  // training goes on: the checkpoint keeps the values of step 5
  ASSERT_TRUE(writer.Wait().ok());
  auto durable = writer.TakeDurable();
  ASSERT_TRUE(durable.ok());
  EXPECT_EQ(*durable, std::vector<int64_t>{5});
  EXPECT_TRUE(writer.TakeDurable()->empty());  // handed out once

  std::vector<float> back(3);
  auto info = ReadCheckpointFile(dir, "job-1", 3, 5, {{"w", back}});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->optimizer_steps, 6);
  EXPECT_EQ(back, (std::vector<float>{1.f, 2.f, 3.f}));
}

TEST(AsyncCheckpointWriterTest, ASaveWaitsForThePreviousOneAndKeepsTheNewestTwo) {
  const std::string dir = FreshDir("async-keep");
  std::vector<float> w(1 << 16);
  AsyncCheckpointWriter writer(dir, "job-1", 0);
  for (int step = 0; step < 4; ++step) {
    w.assign(w.size(), static_cast<float>(step));
    ASSERT_TRUE(writer.Save({step, step}, {{"w", w}}).ok());
  }
  ASSERT_TRUE(writer.Wait().ok());
  EXPECT_EQ(*writer.TakeDurable(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(dir, "job-1", 0, 1)));
  std::vector<float> back(w.size());
  ASSERT_TRUE(ReadCheckpointFile(dir, "job-1", 0, 3, {{"w", back}}).ok());
  EXPECT_EQ(back[123], 3.f);
}

// The files a restart may need survive however far the run gets ahead of the coordinator's
// restart point (found by tests/soak_test: ranks ran on while the coordinator was down, and
// keeping the newest four deleted the file the restart needed).
TEST(AsyncCheckpointWriterTest, FilesFromTheRestartPointOnAreKept) {
  const std::string dir = FreshDir("async-floor");
  std::vector<float> w{1.f};
  AsyncCheckpointWriter writer(dir, "job-1", 0, /*keep=*/1);
  writer.KeepFrom(2);
  auto on_disk = [&] {
    std::vector<int> steps;
    for (int s = 0; s < 12; ++s) {
      if (std::filesystem::exists(CheckpointPath(dir, "job-1", 0, s))) steps.push_back(s);
    }
    return steps;
  };
  for (int step = 0; step < 8; ++step) ASSERT_TRUE(writer.Save({step, step}, {{"w", w}}).ok());
  ASSERT_TRUE(writer.Wait().ok());
  EXPECT_EQ(on_disk(), (std::vector<int>{2, 3, 4, 5, 6, 7}));
  writer.KeepFrom(6);
  writer.KeepFrom(4);  // only ever raised
  ASSERT_TRUE(writer.Save({8, 8}, {{"w", w}}).ok());
  ASSERT_TRUE(writer.Wait().ok());
  EXPECT_EQ(on_disk(), (std::vector<int>{6, 7, 8}));
}

TEST(AsyncCheckpointWriterTest, AFailedWriteIsReportedByTheNextCall) {
  // A regular file where the job's directory should be: the background write fails.
  const std::string dir = FreshDir("async-fail");
  std::filesystem::create_directories(dir);
  { std::ofstream(dir + "/job-1") << "not a directory"; }
  std::vector<float> w{1.f};
  AsyncCheckpointWriter writer(dir, "job-1", 0);
  ASSERT_TRUE(writer.Save({0, 0}, {{"w", w}}).ok());  // the error comes later, from the writer
  Status st = writer.Wait();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(dir + "/job-1"), std::string::npos) << st.message();
  EXPECT_FALSE(writer.TakeDurable().ok());
  EXPECT_FALSE(writer.Save({1, 1}, {{"w", w}}).ok());
}

}  // namespace
}  // namespace pipecoord::worker
