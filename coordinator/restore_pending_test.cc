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

v1::TelemetryBatch StepBatch(const std::string& worker, const std::string& job, int step, uint64_t session) {
  v1::TelemetryBatch b;
  b.set_worker_id(worker);
  b.set_job_id(job);
  b.set_session(session);
  auto* s = b.add_steps();
  s->set_step(step);
  s->set_loss(1);
  s->set_has_loss(true);
  s->add_checkpointed_steps(step);
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

}  // namespace
}  // namespace pipecoord::coordinator
