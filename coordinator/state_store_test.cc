#include "coordinator/state_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace pipecoord::coordinator {
namespace {

std::string TempPath() {
  std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  return dir + "/state-" + std::to_string(getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db";
}

// One coordinator per state file: a second store (here in the same process, as flock locks belong
// to the open file) is refused naming the file and the holder, and gets it once the first closes.
TEST(StateStoreTest, ASecondStoreOnTheSameFileIsRefused) {
  const std::string path = TempPath();
  std::remove(path.c_str());
  auto first = StateStore::Open(path);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = StateStore::Open(path);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kFailedPrecondition);
  std::string me;
  {
    FILE* comm = std::fopen("/proc/self/comm", "r");
    char name[64] = {0};
    if (comm != nullptr && std::fgets(name, sizeof name, comm) != nullptr) me = std::string(name, std::strcspn(name, "\n"));
    if (comm != nullptr) std::fclose(comm);
  }
  EXPECT_EQ(second.status().message(), "--state " + path + ": the state file is in use by another coordinator (pid " +
                                           std::to_string(getpid()) + " (" + me + ")); one coordinator per state file");
  first->reset();
  EXPECT_TRUE(StateStore::Open(path).ok());
}

TEST(StateStoreTest, EverythingWrittenComesBackAfterReopening) {
  const std::string path = TempPath();
  std::remove(path.c_str());
  {
    auto store = StateStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    v1::Job job;
    job.set_id("job-000001");
    job.set_state(v1::RUNNING);
    job.mutable_spec()->set_pp(4);
    job.add_events()->set_message("must not be stored in the row");
    ASSERT_TRUE((*store)->PutJob(job).ok());
    job.set_state(v1::SUCCEEDED);  // an update replaces the row, keeping its place
    ASSERT_TRUE((*store)->PutJob(job).ok());
    v1::Job second;
    second.set_id("job-000002");
    ASSERT_TRUE((*store)->PutJob(second).ok());
    ASSERT_TRUE((*store)->AppendEvent("job-000001", "submitted").ok());
    ASSERT_TRUE((*store)->AppendEvent("job-000001", "SUCCEEDED").ok());
    v1::StepRecord step;
    step.set_step(0);
    step.set_loss(4.5);
    ASSERT_TRUE((*store)->AppendStep("job-000001", step).ok());
    v1::TelemetryBatch batch;
    batch.set_job_id("job-000001");
    batch.add_actions()->set_start_ns(7);
    ASSERT_TRUE((*store)->AppendTelemetry("job-000001", batch).ok());
    ASSERT_TRUE((*store)->PutWorker("worker-0003").ok());
    ASSERT_TRUE((*store)->PutCounters(3, 4, 2).ok());
  }
  auto store = StateStore::Open(path);
  ASSERT_TRUE(store.ok());
  std::vector<std::vector<std::string>> events;
  auto state = (*store)->Load(&events);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ASSERT_EQ(state->jobs.size(), 2u);
  EXPECT_EQ(state->jobs[0].id(), "job-000001");
  EXPECT_EQ(state->jobs[0].state(), v1::SUCCEEDED);
  EXPECT_EQ(state->jobs[0].spec().pp(), 4);
  EXPECT_EQ(state->jobs[0].events_size(), 0);
  ASSERT_EQ(state->jobs[0].steps_size(), 1);
  EXPECT_EQ(state->jobs[0].steps(0).loss(), 4.5);
  EXPECT_EQ(events[0], (std::vector<std::string>{"submitted", "SUCCEEDED"}));
  ASSERT_EQ(state->telemetry[0].size(), 1u);
  EXPECT_EQ(state->telemetry[0][0].batch.actions(0).start_ns(), 7);
  EXPECT_TRUE(state->telemetry[1].empty());
  EXPECT_EQ(state->worker_ids, std::vector<std::string>{"worker-0003"});
  EXPECT_EQ(state->next_job, 3u);
  EXPECT_EQ(state->next_worker, 4u);
  EXPECT_EQ(state->next_session, 2u);

  ASSERT_TRUE((*store)->DeleteJob("job-000001").ok());
  state = (*store)->Load(&events);
  ASSERT_EQ(state->jobs.size(), 1u);
  EXPECT_EQ(state->jobs[0].id(), "job-000002");
}

TEST(StateStoreTest, DroppingOldTelemetryTouchesOnlyThatJobsOlderRows) {
  const std::string path = TempPath();
  std::remove(path.c_str());
  auto store = StateStore::Open(path);
  ASSERT_TRUE(store.ok());
  StateStore& s = **store;
  v1::Job a, b;
  a.set_id("job-a");
  b.set_id("job-b");
  ASSERT_TRUE(s.PutJob(a).ok());
  ASSERT_TRUE(s.PutJob(b).ok());
  std::vector<int64_t> seq_a;
  for (int k = 0; k < 4; ++k) {
    v1::TelemetryBatch batch;
    batch.add_actions()->set_start_ns(k);
    auto sa = s.AppendTelemetry("job-a", batch);
    auto sb = s.AppendTelemetry("job-b", batch);
    ASSERT_TRUE(sa.ok() && sb.ok());
    EXPECT_EQ(*sb, *sa + 1);  // one sequence over all jobs, in arrival order
    seq_a.push_back(*sa);
  }
  ASSERT_TRUE(s.DropTelemetryBefore("job-a", seq_a[2]).ok());
  ASSERT_TRUE(s.PutCheckpointedSteps("job-a", 7).ok());
  ASSERT_TRUE(s.PutCheckpointedSteps("job-a", 9).ok());  // replaces
  std::vector<std::vector<std::string>> events;
  auto state = s.Load(&events);
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->telemetry[0].size(), 2u);
  EXPECT_EQ(state->telemetry[0][0].seq, seq_a[2]);
  EXPECT_EQ(state->telemetry[0][0].batch.actions(0).start_ns(), 2);
  EXPECT_EQ(state->telemetry[1].size(), 4u);
  EXPECT_EQ(state->jobs[0].checkpointed_steps(), 9);
  EXPECT_EQ(state->jobs[1].checkpointed_steps(), 0);
  ASSERT_TRUE(s.DeleteJob("job-a").ok());
  ASSERT_TRUE(s.PutJob(a).ok());  // a job of the same id starts clean
  state = s.Load(&events);
  EXPECT_EQ(state->jobs[1].checkpointed_steps(), 0);
  EXPECT_TRUE(state->telemetry[1].empty());
}

TEST(StateStoreTest, ANonDatabaseFileIsRefusedNamingThePath) {
  const std::string path = TempPath();
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("this is not sqlite, and it is long enough to have a header page ............................................", f);
  std::fclose(f);
  auto store = StateStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kUnavailable);
  EXPECT_EQ(store.status().message().rfind("--state " + path + ": not a usable pipecoord state file", 0), 0u)
      << store.status().message();
}

TEST(StateStoreTest, AnUnwritableDirectoryIsRefused) {
  auto store = StateStore::Open("/nonexistent-dir/state.db");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().message().rfind("--state /nonexistent-dir/state.db: cannot open", 0), 0u);
}

}  // namespace
}  // namespace pipecoord::coordinator
