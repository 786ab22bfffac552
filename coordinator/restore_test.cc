// A coordinator over a state file, replaced by a new one on the same file: everything that was
// acknowledged comes back.
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
  auto* m = s.mutable_model();
  m->set_layers(2);
  m->set_hidden(8);
  m->set_heads(2);
  m->set_vocab(16);
  m->set_seq_len(4);
  return s;
}

uint64_t AssignedSession(Coordinator& c, const std::string& worker) {
  std::vector<v1::WorkerCommand> cmds;
  EXPECT_TRUE(c.WaitCommands(worker, &cmds, std::chrono::steady_clock::now()).ok());
  return cmds.empty() ? 0 : cmds.front().assign().session();
}

// What a worker says once it closed every link of the job.
v1::ReleaseJobRequest Release(const std::string& worker, const std::string& job, uint64_t session) {
  v1::ReleaseJobRequest r;
  r.set_worker_id(worker);
  r.set_job_id(job);
  r.set_session(session);
  return r;
}

TEST(RestoreTest, AcknowledgedStateSurvivesANewCoordinator) {
  const std::string path = FreshStatePath("restore");
  std::string running, pending, done, worker;
  {
    OnFile first(path);
    ASSERT_TRUE(first.restored.ok());
    Coordinator& c = *first.c;
    done = c.SubmitJob(Spec(1))->job_id();
    worker = c.Register(CpuWorker())->worker_id();
    const uint64_t session = AssignedSession(c, worker);
    // The worker runs `done` to the end, with one step of telemetry.
    v1::TelemetryBatch b;
    b.set_worker_id(worker);
    b.set_job_id(done);
    auto* t = b.add_actions();
    t->mutable_action()->set_op(v1::F);
    t->set_start_ns(1000);
    t->set_end_ns(5000);
    auto* s = b.add_steps();
    s->set_step(0);
    s->set_loss(2.5);
    s->set_has_loss(true);
    v1::TelemetryAck ack;
    ASSERT_TRUE(c.IngestTelemetry(b, &ack).ok());
    v1::ReportResultRequest ok;
    ok.set_worker_id(worker);
    ok.set_job_id(done);
    ok.set_ok(true);
    ASSERT_TRUE(c.ReportResult(ok).ok());
    ASSERT_EQ(c.GetJob(done)->state(), v1::SUCCEEDED);
    ASSERT_TRUE(c.ReleaseJob(Release(worker, done, session)).ok());
    running = c.SubmitJob(Spec(100))->job_id();  // the free worker takes it
    ASSERT_EQ(c.GetJob(running)->state(), v1::RUNNING);
    pending = c.SubmitJob(Spec(100))->job_id();  // no worker left
  }
  OnFile second(path, ShortAdoption());
  ASSERT_TRUE(second.restored.ok()) << second.restored.ToString();
  Coordinator& c = *second.c;
  // The running job waits for its worker to come back holding it; it does not within the grace.
  EXPECT_EQ(c.GetJob(running)->state(), v1::RUNNING);
  EndAdoption(c);
  auto d = c.GetJob(done);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->state(), v1::SUCCEEDED);
  ASSERT_EQ(d->steps_size(), 1);
  EXPECT_EQ(d->steps(0).loss(), 2.5);
  EXPECT_EQ(d->steps_done(), 1);
  EXPECT_EQ(d->events(d->events_size() - 1).message(), "SUCCEEDED");
  EXPECT_NE(c.Trace(done)->find("\"ts\": 0, \"dur\": 4"), std::string::npos) << *c.Trace(done);
  auto r = c.GetJob(running);
  EXPECT_EQ(r->state(), v1::FAILED);
  EXPECT_EQ(r->failure_cause(), "the coordinator restarted and rank 0 (dp 0) on " + worker + " did not come back within 1 ms");
  EXPECT_EQ(r->failed_rank(), 0);
  EXPECT_EQ(c.GetJob(pending)->state(), v1::PENDING);
  // Ids continue; the old worker may come back under its identity and takes the pending job.
  EXPECT_EQ(c.SubmitJob(Spec(1))->job_id(), "job-000004");
  EXPECT_EQ(c.Register(CpuWorker(worker))->worker_id(), worker);
  EXPECT_EQ(c.GetJob(pending)->state(), v1::RUNNING);
}

// One step of a pp 1 job's telemetry from `worker`.
v1::TelemetryBatch StepBatch(const std::string& worker, const std::string& job, int step, bool checkpointed, uint64_t session) {
  v1::TelemetryBatch b;
  b.set_worker_id(worker);
  b.set_job_id(job);
  b.set_session(session);
  auto* s = b.add_steps();
  s->set_step(step);
  s->set_loss(10.0 - step);
  s->set_has_loss(true);
  if (checkpointed) s->add_checkpointed_steps(step);
  return b;
}

// The session of the assignment waiting for `worker` (its first command).

TEST(RestoreTest, ARestartableRunningJobResumesFromItsCheckpointAfterANewCoordinator) {
  const std::string path = FreshStatePath("restore-restart");
  v1::JobSpec spec = Spec(10);
  spec.set_checkpoint_every(2);
  spec.set_max_restarts(2);
  std::string job, worker;
  {
    OnFile first(path);
    ASSERT_TRUE(first.restored.ok());
    Coordinator& c = *first.c;
    job = c.SubmitJob(spec)->job_id();
    worker = c.Register(CpuWorker())->worker_id();
    uint64_t session = AssignedSession(c, worker);
    v1::TelemetryAck ack;
    // Attempt 1: steps 0..2, checkpoint at 1; it fails and restarts at step 2.
    for (int step = 0; step < 3; ++step) ASSERT_TRUE(c.IngestTelemetry(StepBatch(worker, job, step, step == 1, session), &ack).ok());
    v1::ReportResultRequest bad;
    bad.set_worker_id(worker);
    bad.set_job_id(job);
    bad.set_message("killed");
    bad.set_session(session);
    ASSERT_TRUE(c.ReportResult(bad).ok());
    std::vector<v1::WorkerCommand> cmds;
    ASSERT_TRUE(c.WaitCommands(worker, &cmds, std::chrono::steady_clock::now()).ok());
    ASSERT_EQ(cmds.at(0).cancel_job_id(), job);
    ASSERT_TRUE(c.ReleaseJob(Release(worker, job, session)).ok());  // the restart waits for this
    ASSERT_TRUE(c.WaitCommands(worker, &cmds, std::chrono::steady_clock::now()).ok());
    ASSERT_EQ(cmds.at(1).assign().start_step(), 2);
    session = cmds.at(1).assign().session();
    // Attempt 2: steps 2..5, checkpoints at 3 and 5; then the coordinator dies.
    for (int step = 2; step < 6; ++step) ASSERT_TRUE(c.IngestTelemetry(StepBatch(worker, job, step, step % 2 == 1, session), &ack).ok());
    ASSERT_EQ(c.GetJob(job)->checkpointed_steps(), 6);
  }
  OnFile second(path, ShortAdoption());
  ASSERT_TRUE(second.restored.ok()) << second.restored.ToString();
  Coordinator& c = *second.c;
  EndAdoption(c);  // its worker is not back within the grace: the restart policy applies
  auto j = c.GetJob(job);
  EXPECT_EQ(j->state(), v1::PENDING);  // waits for a worker
  EXPECT_EQ(j->restarts(), 2);
  EXPECT_EQ(j->start_step(), 6);
  ASSERT_EQ(j->steps_size(), 6);  // steps 0..5 once each: attempt 1's step 2 was replaced
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(j->steps(k).step(), k);
    EXPECT_EQ(j->steps(k).loss(), 10.0 - k);
  }
  EXPECT_EQ(j->events(j->events_size() - 1).message(),
            "restarting (2 of 2) from step 6 (its checkpoint): the coordinator restarted and rank 0 (dp 0) on " + worker +
                " did not come back within 1 ms");
  ASSERT_TRUE(c.Register(CpuWorker(worker)).ok());
  std::vector<v1::WorkerCommand> cmds;
  ASSERT_TRUE(c.WaitCommands(worker, &cmds, std::chrono::steady_clock::now()).ok());
  EXPECT_EQ(cmds.at(0).assign().start_step(), 6);
  EXPECT_EQ(c.GetJob(job)->state(), v1::RUNNING);
}

// A coordinator killed while a pp 2 job runs, and a new one on its state file: the job stays
// RUNNING, each worker that registers again holding the attempt keeps its rank, a step only one
// rank had reported is completed by the other's batch, batches sent again are acknowledged and
// not counted, and the job runs to the end with every step once and no restart. A registration
// naming another attempt is not adopted. The epoch grows with the restart.
TEST(RestoreTest, ARunningJobsWorkersComingBackAreReadoptedAndNoStepIsLostOrCountedTwice) {
  const std::string path = FreshStatePath("restore-adopt");
  v1::JobSpec spec = Spec(10);
  spec.set_pp(2);
  std::string job;
  std::string by_rank[2];
  uint64_t session = 0;
  auto batch = [&](int rank, int step) {
    v1::TelemetryBatch b = StepBatch(by_rank[rank], job, step, false, session);
    b.set_rank(rank);
    return b;
  };
  v1::TelemetryAck ack;
  {
    OnFile first(path);
    ASSERT_TRUE(first.restored.ok());
    Coordinator& c = *first.c;
    job = c.SubmitJob(spec)->job_id();
    for (int k = 0; k < 2; ++k) {
      auto reg = c.Register(CpuWorker());
      ASSERT_TRUE(reg.ok());
      EXPECT_EQ(reg->epoch(), 1u);  // a fresh state file's first coordinator
    }
    const v1::Job running = *c.GetJob(job);
    ASSERT_EQ(running.state(), v1::RUNNING);
    for (int g = 0; g < 2; ++g) {
      std::vector<v1::WorkerCommand> cmds;
      ASSERT_TRUE(c.WaitCommands(running.worker_ids(g), &cmds, std::chrono::steady_clock::now()).ok());
      ASSERT_EQ(cmds.size(), 1u);
      EXPECT_EQ(cmds[0].epoch(), 1u);
      by_rank[cmds[0].assign().rank()] = running.worker_ids(g);
      session = cmds[0].assign().session();
    }
    for (int step = 0; step < 3; ++step) {
      for (int rank = 0; rank < 2; ++rank) ASSERT_TRUE(c.IngestTelemetry(batch(rank, step), &ack).ok());
    }
    ASSERT_TRUE(c.IngestTelemetry(batch(0, 3), &ack).ok());  // rank 1's step 3 is in flight
    ASSERT_EQ(c.GetJob(job)->steps_size(), 3);
  }
  OnFile second(path);
  ASSERT_TRUE(second.restored.ok()) << second.restored.ToString();
  Coordinator& c = *second.c;
  EXPECT_EQ(c.GetJob(job)->state(), v1::RUNNING);
  EXPECT_EQ(c.GetJob(job)->steps_size(), 3);
  auto come_back = [&](const std::string& id, uint64_t held_session) {
    v1::RegisterRequest r = CpuWorker(id);
    r.set_held_job_id(job);
    r.set_held_session(held_session);
    return c.Register(r);
  };
  auto stale = come_back("worker-from-elsewhere", session);
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(stale->held_job_adopted()) << "a worker the attempt never had";
  auto other_session = come_back("worker-other-attempt", session + 1);
  ASSERT_TRUE(other_session.ok());
  EXPECT_FALSE(other_session->held_job_adopted());
  for (int rank = 0; rank < 2; ++rank) {
    auto back = come_back(by_rank[rank], session);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_TRUE(back->held_job_adopted());
    EXPECT_EQ(back->epoch(), 2u);
  }
  const v1::Job adopted = *c.GetJob(job);
  EXPECT_EQ(adopted.state(), v1::RUNNING);
  EXPECT_EQ(adopted.restarts(), 0);
  EXPECT_EQ(adopted.events(adopted.events_size() - 1).message(),
            "re-adopted after the coordinator restart: all 2 rank(s) back, training went on; steps recorded: 3");
  // Sent again (the workers cannot know what was stored): acknowledged, not stored again.
  v1::TelemetryAck again;
  ASSERT_TRUE(c.IngestTelemetry(batch(0, 2), &again).ok());
  ASSERT_TRUE(c.IngestTelemetry(batch(0, 3), &again).ok());
  EXPECT_EQ(again.steps_accepted(), 2);  // acknowledged as stored
  EXPECT_EQ(c.GetJob(job)->steps_size(), 3);
  // Rank 1's step 3 completes the step rank 0 reported to the previous coordinator.
  ASSERT_TRUE(c.IngestTelemetry(batch(1, 3), &ack).ok());
  ASSERT_EQ(c.GetJob(job)->steps_size(), 4);
  v1::HeartbeatRequest hb;
  hb.set_worker_id(by_rank[0]);
  auto answer = c.Heartbeat(hb);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->next_telemetry_step(), 4);
  EXPECT_EQ(answer->epoch(), 2u);
  for (int step = 4; step < 10; ++step) {
    for (int rank = 0; rank < 2; ++rank) ASSERT_TRUE(c.IngestTelemetry(batch(rank, step), &ack).ok());
  }
  for (int rank = 0; rank < 2; ++rank) {
    v1::ReportResultRequest ok;
    ok.set_worker_id(by_rank[rank]);
    ok.set_job_id(job);
    ok.set_rank(rank);
    ok.set_ok(true);
    ok.set_session(session);
    ASSERT_TRUE(c.ReportResult(ok).ok());
  }
  const v1::Job done = *c.GetJob(job);
  EXPECT_EQ(done.state(), v1::SUCCEEDED) << done.failure_cause();
  EXPECT_EQ(done.restarts(), 0);
  ASSERT_EQ(done.steps_size(), 10);
  for (int k = 0; k < 10; ++k) {
    EXPECT_EQ(done.steps(k).step(), k);
    EXPECT_EQ(done.steps(k).loss(), 10.0 - k);
  }
}

// The coordinator died after dispatching a job but before a worker's command stream carried the
// assignment: that worker comes back holding nothing. The attempt cannot have got past
// connecting, so it goes back to the queue at once (no restart counted, no grace waited out) and
// runs again on the workers that are back.
TEST(RestoreTest, AWorkerThatNeverGotItsAssignmentSendsTheAttemptBackToTheQueue) {
  const std::string path = FreshStatePath("restore-undelivered");
  v1::JobSpec spec = Spec(10);
  spec.set_pp(2);
  std::string job, w0, w1;
  {
    OnFile first(path);
    ASSERT_TRUE(first.restored.ok());
    Coordinator& c = *first.c;
    job = c.SubmitJob(spec)->job_id();
    w0 = c.Register(CpuWorker())->worker_id();
    w1 = c.Register(CpuWorker())->worker_id();
    ASSERT_EQ(c.GetJob(job)->state(), v1::RUNNING);  // dispatched; the commands were never read
  }
  OnFile second(path);
  ASSERT_TRUE(second.restored.ok()) << second.restored.ToString();
  Coordinator& c = *second.c;
  ASSERT_TRUE(c.Register(CpuWorker(w0)).ok());
  v1::Job queued = *c.GetJob(job);
  EXPECT_EQ(queued.state(), v1::PENDING);
  EXPECT_EQ(queued.restarts(), 0);
  EXPECT_EQ(queued.events(queued.events_size() - 1).message(),
            "back in the queue (the coordinator restarted before worker " + w0 +
                " got its assignment, before its first step)");
  ASSERT_TRUE(c.Register(CpuWorker(w1)).ok());
  EXPECT_EQ(c.GetJob(job)->state(), v1::RUNNING);
  std::vector<v1::WorkerCommand> cmds;
  ASSERT_TRUE(c.WaitCommands(w1, &cmds, std::chrono::steady_clock::now()).ok());
  ASSERT_EQ(cmds.size(), 1u);
  EXPECT_EQ(cmds[0].assign().start_step(), 0);
}

// A rank finished its part (every step stored, success reported) just before the coordinator
// died, while the other rank still ran. Its part is over, not lost, whether it had let the job go
// (it comes back holding nothing) or was still closing it (it comes back holding it, then
// releases): the attempt goes on and succeeds with no restart. (The soak test's seeds 2 and 14
// once restarted such jobs, blaming a worker that had done its work.)
void FinishedRankAcrossARestart(bool released_before) {
  SCOPED_TRACE(released_before ? "released before the restart" : "released after it");
  const std::string path = FreshStatePath(released_before ? "restore-finished-released" : "restore-finished-closing");
  v1::JobSpec spec = Spec(4);
  spec.set_pp(2);
  std::string job;
  std::string by_rank[2];
  uint64_t session = 0;
  v1::TelemetryAck ack;
  auto batch = [&](int rank, int step) {
    v1::TelemetryBatch b = StepBatch(by_rank[rank], job, step, false, session);
    b.set_rank(rank);
    return b;
  };
  auto result = [&](int rank) {
    v1::ReportResultRequest ok;
    ok.set_worker_id(by_rank[rank]);
    ok.set_job_id(job);
    ok.set_rank(rank);
    ok.set_ok(true);
    ok.set_session(session);
    return ok;
  };
  {
    OnFile first(path);
    ASSERT_TRUE(first.restored.ok());
    Coordinator& c = *first.c;
    job = c.SubmitJob(spec)->job_id();
    for (int k = 0; k < 2; ++k) ASSERT_TRUE(c.Register(CpuWorker()).ok());
    const v1::Job running = *c.GetJob(job);
    for (int g = 0; g < 2; ++g) {
      std::vector<v1::WorkerCommand> cmds;
      ASSERT_TRUE(c.WaitCommands(running.worker_ids(g), &cmds, std::chrono::steady_clock::now()).ok());
      by_rank[cmds[0].assign().rank()] = running.worker_ids(g);
      session = cmds[0].assign().session();
    }
    for (int step = 0; step < 4; ++step) ASSERT_TRUE(c.IngestTelemetry(batch(1, step), &ack).ok());
    for (int step = 0; step < 3; ++step) ASSERT_TRUE(c.IngestTelemetry(batch(0, step), &ack).ok());
    ASSERT_TRUE(c.ReportResult(result(1)).ok());  // rank 1 is done; rank 0's last step runs on
    if (released_before) {
      ASSERT_TRUE(c.ReleaseJob(Release(by_rank[1], job, session)).ok());
    }
    ASSERT_EQ(c.GetJob(job)->state(), v1::RUNNING);
  }
  OnFile second(path);
  ASSERT_TRUE(second.restored.ok()) << second.restored.ToString();
  Coordinator& c = *second.c;
  auto come_back = [&](int rank, bool holding) {
    v1::RegisterRequest r = CpuWorker(by_rank[rank]);
    if (holding) {
      r.set_held_job_id(job);
      r.set_held_session(session);
    }
    return c.Register(r);
  };
  auto one = come_back(1, !released_before);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->held_job_adopted(), !released_before);
  if (!released_before) {
    ASSERT_TRUE(c.ReleaseJob(Release(by_rank[1], job, session)).ok());
  }
  v1::Job waiting = *c.GetJob(job);
  EXPECT_EQ(waiting.state(), v1::RUNNING) << waiting.failure_cause();
  EXPECT_EQ(waiting.restarts(), 0);
  auto zero = come_back(0, true);
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(zero->held_job_adopted());
  ASSERT_TRUE(c.IngestTelemetry(batch(0, 3), &ack).ok());
  ASSERT_TRUE(c.ReportResult(result(0)).ok());
  const v1::Job done = *c.GetJob(job);
  EXPECT_EQ(done.state(), v1::SUCCEEDED) << done.failure_cause();
  EXPECT_EQ(done.restarts(), 0);
  EXPECT_EQ(done.steps_size(), 4);
}

TEST(RestoreTest, ARankThatFinishedBeforeTheRestartIsNotLost) {
  FinishedRankAcrossARestart(/*released_before=*/true);
  FinishedRankAcrossARestart(/*released_before=*/false);
}

// Occurrences of `needle` in `text`.
int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(RestoreTest, TheStateFileKeepsTheTraceWindowOfTelemetryAndTheCheckpointBeyondIt) {
  const std::string path = FreshStatePath("restore-window");
  constexpr int kWindow = 10, kSteps = 600;
  v1::JobSpec spec = Spec(1000);
  spec.set_checkpoint_every(4);
  spec.set_max_restarts(1);
  CoordinatorOptions small_window;
  small_window.trace_actions_per_job = kWindow;
  std::string job, worker;
  {
    OnFile first(path, small_window);
    ASSERT_TRUE(first.restored.ok());
    Coordinator& c = *first.c;
    job = c.SubmitJob(spec)->job_id();
    worker = c.Register(CpuWorker())->worker_id();
    const uint64_t session = AssignedSession(c, worker);
    v1::TelemetryAck ack;
    // One action and one step per batch; only step 3 is checkpointed, its row dropped long ago.
    for (int step = 0; step < kSteps; ++step) {
      v1::TelemetryBatch b = StepBatch(worker, job, step, step == 3, session);
      auto* t = b.add_actions();
      t->mutable_action()->set_op(v1::F);
      t->set_step(step);
      t->set_start_ns(1000 * step);
      t->set_end_ns(1000 * step + 500);
      ASSERT_TRUE(c.IngestTelemetry(b, &ack).ok());
    }
    ASSERT_EQ(c.GetJob(job)->checkpointed_steps(), 4);
  }
  {
    // The file holds the window (kWindow rows) plus rows not yet dropped (fewer than one chunk of
    // 256), not all 600; the newest rows are there, in order.
    auto store = StateStore::Open(path);
    ASSERT_TRUE(store.ok());
    std::vector<std::vector<std::string>> events;
    auto state = (*store)->Load(&events);
    ASSERT_TRUE(state.ok());
    const auto& rows = state->telemetry.at(0);
    EXPECT_GE(rows.size(), static_cast<size_t>(kWindow));
    EXPECT_LT(rows.size(), static_cast<size_t>(kWindow + 256));
    for (size_t k = 0; k < rows.size(); ++k) {
      EXPECT_EQ(rows[k].batch.steps(0).step(), kSteps - static_cast<int>(rows.size() - k));
    }
    EXPECT_EQ(state->jobs.at(0).checkpointed_steps(), 4);
  }
  OnFile second(path, ShortAdoption(small_window));
  ASSERT_TRUE(second.restored.ok()) << second.restored.ToString();
  Coordinator& c = *second.c;
  EndAdoption(c);
  auto j = c.GetJob(job);
  EXPECT_EQ(j->checkpointed_steps(), 4);
  EXPECT_EQ(j->steps_size(), 4);  // the steps after the checkpoint will be run again
  EXPECT_EQ(j->start_step(), 4);  // resumes from the checkpoint whose telemetry row is gone
  // The trace shows exactly the newest kWindow actions: steps 590..599.
  const std::string trace = *c.Trace(job);
  EXPECT_EQ(Count(trace, "\"cat\": \"compute\", \"ph\": \"X\""), kWindow) << trace;  // measured actions only
  EXPECT_NE(trace.find("\"step\": 590}"), std::string::npos);
  EXPECT_NE(trace.find("\"step\": 599}"), std::string::npos);
  EXPECT_EQ(trace.find("\"step\": 589}"), std::string::npos);
}

TEST(RestoreTest, MaxJobsDropsTheOldestFinishedJobFromTheFileToo) {
  const std::string path = FreshStatePath("restore-max-jobs");
  CoordinatorOptions two;
  two.max_jobs = 2;
  std::string a, b, c;
  {
    OnFile first(path, two);
    ASSERT_TRUE(first.restored.ok());
    Coordinator& co = *first.c;
    a = co.SubmitJob(Spec(1))->job_id();  // no workers: both stay PENDING, live
    b = co.SubmitJob(Spec(1))->job_id();
    auto refused = co.SubmitJob(Spec(1));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), Code::kResourceExhausted);
    EXPECT_EQ(refused.status().message(), "jobs: 2 live jobs stored, the limit (--max-jobs 2)");
    ASSERT_TRUE(co.CancelJob(a).ok());
    c = co.SubmitJob(Spec(1))->job_id();  // room made by dropping a, the finished one
    EXPECT_EQ(co.GetJob(a).status().code(), Code::kNotFound);
    EXPECT_TRUE(co.GetJob(b).ok());
    ASSERT_TRUE(co.CancelJob(b).ok());
  }
  {
    OnFile again(path, two);
    ASSERT_TRUE(again.restored.ok());
    EXPECT_EQ(again.c->GetJob(a).status().code(), Code::kNotFound);  // gone from the file too
    EXPECT_EQ(again.c->ListJobs().size(), 2u);
  }
  // Restarted with a lower limit: the oldest finished job (b) goes; the live one (c) stays.
  CoordinatorOptions one;
  one.max_jobs = 1;
  OnFile lowered(path, one);
  ASSERT_TRUE(lowered.restored.ok());
  ASSERT_EQ(lowered.c->ListJobs().size(), 1u);
  EXPECT_EQ(lowered.c->ListJobs()[0].id(), c);
}

}  // namespace
}  // namespace pipecoord::coordinator
