// A job that restarted and was waiting for workers (PENDING, start_step > 0) when the coordinator
// stopped: the new coordinator resumes it from its start step, and the telemetry of that step counts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include "coordinator/coordinator.h"
#include "coordinator/state_file_for_tests.h"
#include "coordinator/state_store.h"

namespace pipecoord::coordinator {
namespace {

v1::JobSpec Spec(int steps) {
  v1::JobSpec s;
  s.set_name("persisted");
  s.set_schedule("1f1b");
  s.set_pp(1);
  s.set_microbatches(1);
  s.set_micro_batch_size(1);
  s.set_steps(steps);
  s.set_checkpoint_every(1);
  s.set_max_restarts(1);
  auto* m = s.mutable_model();
  m->set_layers(2);
  m->set_hidden(8);
  m->set_heads(2);
  m->set_vocab(16);
  m->set_seq_len(4);
  return s;
}

v1::TelemetryBatch StepBatch(const std::string& worker, const std::string& job, int step, uint64_t session,
                             bool checkpointed = true) {
  v1::TelemetryBatch b;
  b.set_worker_id(worker);
  b.set_job_id(job);
  b.set_session(session);
  auto* s = b.add_steps();
  s->set_step(step);
  s->set_loss(1);
  s->set_has_loss(true);
  if (checkpointed) s->add_checkpointed_steps(step);
  return b;
}

uint64_t AssignedSession(Coordinator& c, const std::string& worker, int* start_step) {
  std::vector<v1::WorkerCommand> cmds;
  EXPECT_TRUE(c.WaitCommands(worker, &cmds, std::chrono::steady_clock::now()).ok());
  for (const auto& cmd : cmds) {
    if (cmd.has_assign()) {
      *start_step = cmd.assign().start_step();
      return cmd.assign().session();
    }
  }
  return 0;
}

TEST(RestorePendingTest, ARestartedJobWaitingForWorkersResumesFromItsStartStepAfterANewCoordinator) {
  const std::string path = FreshStatePath("restore-pending");
  std::string job, worker;
  {
    auto store = StateStore::Open(path);
    ASSERT_TRUE(store.ok());
    CoordinatorOptions o;
    o.store = store->get();
    Coordinator c(o);
    ASSERT_TRUE(c.Restore().ok());
    job = c.SubmitJob(Spec(10))->job_id();
    worker = c.Register(CpuWorker())->worker_id();
    int start = -1;
    const uint64_t session = AssignedSession(c, worker, &start);
    v1::TelemetryAck ack;
    for (int step = 0; step < 2; ++step) ASSERT_TRUE(c.IngestTelemetry(StepBatch(worker, job, step, session), &ack).ok());
    v1::ReportResultRequest bad;
    bad.set_worker_id(worker);
    bad.set_job_id(job);
    bad.set_message("killed");
    bad.set_session(session);
    ASSERT_TRUE(c.ReportResult(bad).ok());
    // The restart waits for the worker's release, which never comes: the coordinator stops.
    ASSERT_EQ(c.GetJob(job)->state(), v1::PENDING);
    ASSERT_EQ(c.GetJob(job)->start_step(), 2);
  }
  auto store = StateStore::Open(path);
  ASSERT_TRUE(store.ok());
  CoordinatorOptions o;
  o.store = store->get();
  Coordinator c(o);
  ASSERT_TRUE(c.Restore().ok());
  ASSERT_EQ(c.GetJob(job)->state(), v1::PENDING);
  ASSERT_TRUE(c.Register(CpuWorker(worker)).ok());
  int start = -1;
  const uint64_t session = AssignedSession(c, worker, &start);
  ASSERT_EQ(start, 2);
  v1::TelemetryAck ack;
  Status st = c.IngestTelemetry(StepBatch(worker, job, 2, session), &ack);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(c.GetJob(job)->steps_done(), 3);
}

// Found by tests/soak_test ("SUCCEEDED with 17 of 16 steps"): the stopped attempt measured steps
// past the restart point (2 and 3 here, checkpointed through 1); in memory the restart dropped
// their records, but a new coordinator read them back from the file, and the resumed attempt's
// own steps 2 and 3 were counted a second time.
TEST(RestorePendingTest, ARestartedJobWaitingForWorkersForgetsTheStoppedAttemptsStepsPastItsStart) {
  const std::string path = FreshStatePath("restore-pending-steps");
  std::string job, worker;
  {
    OnFile first(path);
    ASSERT_TRUE(first.restored.ok());
    Coordinator& c = *first.c;
    job = c.SubmitJob(Spec(6))->job_id();
    worker = c.Register(CpuWorker())->worker_id();
    int start = -1;
    const uint64_t session = AssignedSession(c, worker, &start);
    v1::TelemetryAck ack;
    for (int step = 0; step < 4; ++step) {
      ASSERT_TRUE(c.IngestTelemetry(StepBatch(worker, job, step, session, /*checkpointed=*/step < 2), &ack).ok());
    }
    v1::ReportResultRequest bad;
    bad.set_worker_id(worker);
    bad.set_job_id(job);
    bad.set_message("killed");
    bad.set_session(session);
    ASSERT_TRUE(c.ReportResult(bad).ok());
    auto j = c.GetJob(job);
    ASSERT_EQ(j->state(), v1::PENDING);
    ASSERT_EQ(j->start_step(), 2);
    ASSERT_EQ(j->steps_done(), 2);
  }
  OnFile second(path);
  ASSERT_TRUE(second.restored.ok());
  Coordinator& c = *second.c;
  auto j = c.GetJob(job);
  EXPECT_EQ(j->state(), v1::PENDING);
  EXPECT_EQ(j->steps_done(), 2);
  ASSERT_EQ(j->steps_size(), 2);
  EXPECT_EQ(j->steps(1).step(), 1);
  ASSERT_TRUE(c.Register(CpuWorker(worker)).ok());
  int start = -1;
  const uint64_t session = AssignedSession(c, worker, &start);
  ASSERT_EQ(start, 2);
  v1::TelemetryAck ack;
  for (int step = 2; step < 6; ++step) ASSERT_TRUE(c.IngestTelemetry(StepBatch(worker, job, step, session), &ack).ok());
  v1::ReportResultRequest ok;
  ok.set_worker_id(worker);
  ok.set_job_id(job);
  ok.set_ok(true);
  ok.set_session(session);
  ASSERT_TRUE(c.ReportResult(ok).ok());
  j = c.GetJob(job);
  EXPECT_EQ(j->state(), v1::SUCCEEDED);
  EXPECT_EQ(j->steps_done(), 6);
  std::vector<int> steps;
  for (const v1::StepRecord& r : j->steps()) steps.push_back(r.step());
  EXPECT_EQ(steps, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

}  // namespace
}  // namespace pipecoord::coordinator
