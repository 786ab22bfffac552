#include "coordinator/state_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

namespace pipecoord::coordinator {
namespace {

std::string TempPath() {
  std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  return dir + "/writer-" + std::to_string(getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db";
}

v1::Job Job(const std::string& id) {
  v1::Job j;
  j.set_id(id);
  j.set_state(v1::RUNNING);
  return j;
}

v1::HealthEvent Event(const std::string& message) {
  v1::HealthEvent e;
  e.set_message(message);
  return e;
}

// What the file holds of a job: its events' messages, and its step records' numbers.
struct StoredJob {
  std::vector<std::string> messages;
  std::vector<int> steps;
};
StoredJob Stored(StateWriter& w, const std::string& job_id) {
  std::vector<std::vector<std::string>> events;
  auto state = w.Load(&events);
  EXPECT_TRUE(state.ok());
  StoredJob out;
  for (size_t k = 0; state.ok() && k < state->jobs.size(); ++k) {
    if (state->jobs[k].id() != job_id) continue;
    for (const std::string& bytes : events[k]) {
      v1::HealthEvent e;
      EXPECT_TRUE(e.ParseFromString(bytes));
      out.messages.push_back(e.message());
    }
    for (const v1::StepRecord& r : state->jobs[k].steps()) out.steps.push_back(r.step());
  }
  return out;
}

// A fresh SQLite file with a writer over it and two jobs stored, job-1 and job-2.
struct TwoJobs {
  TwoJobs() : path(TempPath()) {
    std::remove(path.c_str());
    auto opened = StateStore::Open(path);
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    if (!opened.ok()) return;
    store = std::move(opened).value();
    w = std::make_unique<StateWriter>(store.get(), 100);
    ready = w->PutNewJob(Job("job-1"), {}).ok() && w->PutNewJob(Job("job-2"), {}).ok();
  }
  ~TwoJobs() { std::remove(path.c_str()); }
  std::string path;
  std::unique_ptr<StateStore> store;
  std::unique_ptr<StateWriter> w;
  bool ready = false;
};

v1::TelemetryBatch OneAction(int step) {
  v1::TelemetryBatch b;
  b.add_actions()->set_step(step);
  return b;
}

TEST(StateWriterTest, WithoutAStoreEveryCallSucceedsAndKeepsNothing) {
  StateWriter w(nullptr, 10);
  EXPECT_FALSE(w.enabled());
  EXPECT_EQ(w.where(), "");
  EXPECT_TRUE(w.PutNewJob(Job("job-1"), {}).ok());
  EXPECT_TRUE(w.PutWorker("worker-1", {}).ok());
  EXPECT_TRUE(w.AppendTelemetry("job-1", OneAction(0)).ok());
  EXPECT_TRUE(w.DeleteJob("job-1").ok());
  std::vector<std::vector<std::string>> events;
  auto state = w.Load(&events);
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(state->jobs.empty());
}

TEST(StateWriterTest, WhatIsWrittenThroughComesBack) {
  const std::string path = TempPath();
  std::remove(path.c_str());
  auto store = StateStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  StateWriter w(store->get(), 100);
  EXPECT_TRUE(w.enabled());
  EXPECT_EQ(w.where(), "state file " + path);
  IdCounters ids{3, 5, 7};
  ASSERT_TRUE(w.PutNewJob(Job("job-1"), ids).ok());
  ASSERT_TRUE(w.PutWorker("worker-4", ids).ok());
  v1::HealthEvent e;
  e.set_message("submitted");
  w.AppendEvent("job-1", e);
  v1::StepRecord rec;
  rec.set_step(0);
  rec.set_loss(2.5);
  w.AppendStep("job-1", rec);
  w.PutCheckpointedSteps("job-1", 1);
  ASSERT_TRUE(w.AppendTelemetry("job-1", OneAction(0)).ok());
  std::vector<std::vector<std::string>> events;
  auto state = w.Load(&events);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ASSERT_EQ(state->jobs.size(), 1u);
  EXPECT_EQ(state->jobs[0].id(), "job-1");
  ASSERT_EQ(state->jobs[0].steps_size(), 1);
  EXPECT_EQ(state->jobs[0].steps(0).loss(), 2.5);
  EXPECT_EQ(state->jobs[0].checkpointed_steps(), 1);
  ASSERT_EQ(events.at(0).size(), 1u);
  EXPECT_EQ(events[0][0], e.SerializeAsString());
  EXPECT_EQ(state->telemetry.at(0).size(), 1u);
  EXPECT_EQ(state->worker_ids, std::vector<std::string>{"worker-4"});
  EXPECT_EQ(state->next_job, 3u);
  EXPECT_EQ(state->next_worker, 5u);
  EXPECT_EQ(state->next_session, 7u);
}

// The file keeps the newest rows holding trace_actions_per_job actions; older rows go 256 at a
// time (one DELETE per chunk).
TEST(StateWriterTest, TheTelemetryRowsInTheFileStayBoundedDroppedInChunks) {
  const std::string path = TempPath();
  std::remove(path.c_str());
  auto store = StateStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  StateWriter w(store->get(), 10);
  ASSERT_TRUE(w.PutNewJob(Job("job-1"), {}).ok());
  auto rows = [&] {
    std::vector<std::vector<std::string>> events;
    auto state = w.Load(&events);
    EXPECT_TRUE(state.ok());
    return state.ok() ? state->telemetry.at(0).size() : 0;
  };
  // 10 rows in the window, 255 outside it: not dropped yet.
  for (int i = 0; i < 265; ++i) ASSERT_TRUE(w.AppendTelemetry("job-1", OneAction(i)).ok());
  EXPECT_EQ(rows(), 265u);
  // The 256th row outside: the chunk goes, the window stays.
  ASSERT_TRUE(w.AppendTelemetry("job-1", OneAction(265)).ok());
  EXPECT_EQ(rows(), 10u);
  std::vector<std::vector<std::string>> events;
  EXPECT_EQ(w.Load(&events)->telemetry.at(0).front().batch.actions(0).step(), 256);
}

// Events inside a round are queued and stored together when the outermost round ends, in the
// order they came; a job deleted in the round takes its queued events with it; outside a round an
// event is in the file at once. (Read back from the SQLite file.)
TEST(StateWriterTest, EventsOfARoundAreStoredTogetherWhenItEnds) {
  TwoJobs f;
  ASSERT_TRUE(f.ready);
  StateWriter& w = *f.w;
  auto stored = [&](size_t job) { return Stored(w, "job-" + std::to_string(job)).messages; };
  auto event = Event;
  w.AppendEvent("job-1", event("outside"));
  EXPECT_EQ(stored(1), std::vector<std::string>{"outside"});
  {
    StateWriter::Round outer(&w);
    for (int i = 0; i < 500; ++i) w.AppendEvent("job-1", event("storm " + std::to_string(i)));
    {
      StateWriter::Round inner(&w);
      w.AppendEvent("job-2", event("gone with its job"));
    }
    EXPECT_EQ(stored(1).size(), 1u) << "queued until the outermost round ends";
    ASSERT_TRUE(w.DeleteJob("job-2").ok());
  }
  const std::vector<std::string> got = stored(1);
  ASSERT_EQ(got.size(), 501u);
  for (int i = 0; i < 500; ++i) EXPECT_EQ(got[i + 1], "storm " + std::to_string(i));
  std::vector<std::vector<std::string>> events;
  auto state = w.Load(&events);
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->jobs.size(), 1u) << "job-2 deleted, none of its events stored after";
}


// The coordinator's ingest round queues its events and step records in a deferred round and
// writes them once it has let go of its lock (Flush); meanwhile any other write stores them first,
// so the file keeps the order they were made in. Telemetry rows of a job deleted before they are
// written (the round stores them outside the lock) are left out and count as stored. (Read back
// from the SQLite file.)
TEST(StateWriterTest, ADeferredRoundWaitsForFlushAndEveryWriteKeepsTheOrder) {
  TwoJobs f;
  ASSERT_TRUE(f.ready);
  StateWriter& w = *f.w;
  auto event = Event;
  auto step = [](int n) {
    v1::StepRecord r;
    r.set_step(n);
    return r;
  };
  auto stored = [&] {
    const StoredJob j = Stored(w, "job-1");
    return std::make_pair(j.messages, j.steps);
  };
  {
    StateWriter::Round round(&w, /*deferred=*/true);
    w.AppendEvent("job-1", event("a"));
    w.AppendStep("job-1", step(0));
  }
  EXPECT_TRUE(stored().first.empty() && stored().second.empty()) << "a deferred round waits for Flush";
  w.PutCheckpointedSteps("job-1", 1);  // another write: what was queued goes first
  EXPECT_EQ(stored().first, std::vector<std::string>{"a"});
  EXPECT_EQ(stored().second, std::vector<int>{0});
  {
    StateWriter::Round round(&w, /*deferred=*/true);
    w.AppendStep("job-1", step(1));
    w.AppendEvent("job-1", event("b"));
  }
  w.Flush();
  EXPECT_EQ(stored().first, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(stored().second, (std::vector<int>{0, 1}));
  // Rows of a job deleted before they are written.
  ASSERT_TRUE(w.DeleteJob("job-2").ok());
  const std::string one = "job-1", two = "job-2";
  const v1::TelemetryBatch b0 = OneAction(0), b1 = OneAction(1), b2 = OneAction(2);
  size_t taken = 0;
  ASSERT_TRUE(w.AppendTelemetryRows({{&one, &b0}, {&two, &b1}, {&one, &b2}}, &taken).ok());
  EXPECT_EQ(taken, 3u);
  std::vector<std::vector<std::string>> events;
  auto state = w.Load(&events);
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->jobs.size(), 1u);
  ASSERT_EQ(state->telemetry.at(0).size(), 2u);
  EXPECT_EQ(state->telemetry[0][0].batch.actions(0).step(), 0);
  EXPECT_EQ(state->telemetry[0][1].batch.actions(0).step(), 2);
}

}  // namespace
}  // namespace pipecoord::coordinator
