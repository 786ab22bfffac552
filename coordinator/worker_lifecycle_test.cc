// A job's lifetime on its workers, driven directly: a worker is busy from its assignment until it
// says it closed every link of the job (ReleaseJob), the recorded cause of a failure is its root,
// and a worker that leaves before the job measured anything sends the job back to the queue.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "coordinator/coordinator.h"
#include "jobplan/tiny_spec_for_tests.h"

namespace pipecoord::coordinator {
namespace {

v1::RegisterRequest WorkerAt(int port) {
  v1::RegisterRequest r;
  r.set_device_kind("cpu");
  r.set_host("localhost");
  r.set_data_endpoint("127.0.0.1:" + std::to_string(port));
  return r;
}

// A coordinator with `n` workers and helpers that act as their daemons would.
struct Cluster {
  Coordinator c;
  std::vector<std::string> workers;
  explicit Cluster(int n, CoordinatorOptions o = {}) : c(std::move(o)) {
    for (int i = 0; i < n; ++i) workers.push_back(c.Register(WorkerAt(7000 + i))->worker_id());
  }
  std::vector<v1::WorkerCommand> Commands(int w) {
    std::vector<v1::WorkerCommand> out;
    EXPECT_TRUE(c.WaitCommands(workers[w], &out, Clock::now() + std::chrono::milliseconds(5)).ok());
    return out;
  }
  // The assignment worker w received last (and its session), draining its queue.
  v1::Assignment Assigned(int w) {
    v1::Assignment a;
    for (auto& cmd : Commands(w)) {
      if (cmd.has_assign()) a = cmd.assign();
    }
    return a;
  }
  Status Report(int w, const v1::Assignment& a, bool ok, const std::string& message = "", std::vector<int> unreachable = {}) {
    v1::ReportResultRequest r;
    r.set_worker_id(workers[w]);
    r.set_job_id(a.job_id());
    r.set_rank(a.rank());
    r.set_session(a.session());
    r.set_ok(ok);
    r.set_message(message);
    for (int g : unreachable) r.add_unreachable_peers(g);
    return c.ReportResult(r);
  }
  Status Release(int w, const v1::Assignment& a) {
    v1::ReleaseJobRequest r;
    r.set_worker_id(workers[w]);
    r.set_job_id(a.job_id());
    r.set_session(a.session());
    return c.ReleaseJob(r);
  }
  v1::WorkerInfo Info(int w) {
    for (const auto& info : c.ListWorkers()) {
      if (info.worker_id() == workers[w]) return info;
    }
    ADD_FAILURE() << "worker " << workers[w] << " is not listed";
    return {};
  }
  v1::JobState State(const std::string& job) { return c.GetJob(job)->state(); }
};

TEST(WorkerLifecycleTest, AWorkerStaysBusyUntilItReleasesItsJob) {
  Cluster k(2);
  const std::string first = k.c.SubmitJob(jobplan::TinySpec(2))->job_id();
  const v1::Assignment a0 = k.Assigned(0), a1 = k.Assigned(1);
  ASSERT_EQ(a0.job_id(), first);
  ASSERT_TRUE(k.Report(0, a0, true).ok());
  ASSERT_TRUE(k.Report(1, a1, true).ok());
  EXPECT_EQ(k.State(first), v1::SUCCEEDED);
  // Its part is over, its links may still be open: listed with the job, closing, and not given
  // the next one.
  EXPECT_EQ(k.Info(0).job_id(), first);
  EXPECT_TRUE(k.Info(0).closing());
  const std::string second = k.c.SubmitJob(jobplan::TinySpec(2))->job_id();
  EXPECT_EQ(k.State(second), v1::PENDING);
  ASSERT_TRUE(k.Release(0, a0).ok());
  EXPECT_EQ(k.Info(0).job_id(), "");
  EXPECT_FALSE(k.Info(0).closing());
  EXPECT_EQ(k.State(second), v1::PENDING);  // worker 1 still holds the first job
  v1::Assignment stale = a1;
  stale.set_session(a1.session() - 1);
  ASSERT_TRUE(k.Release(1, stale).ok());  // an older hold's release changes nothing
  EXPECT_EQ(k.State(second), v1::PENDING);
  ASSERT_TRUE(k.Release(1, a1).ok());
  EXPECT_EQ(k.State(second), v1::RUNNING);
  const v1::Assignment b0 = k.Assigned(0);
  EXPECT_EQ(b0.job_id(), second);
  EXPECT_GT(b0.session(), a0.session());
  EXPECT_FALSE(k.Info(0).closing());
}

TEST(WorkerLifecycleTest, ACancelledJobsWorkersAreToldToStopAndFreedOnRelease) {
  Cluster k(2);
  const std::string job = k.c.SubmitJob(jobplan::TinySpec(2))->job_id();
  const v1::Assignment a0 = k.Assigned(0), a1 = k.Assigned(1);
  ASSERT_EQ(*k.c.CancelJob(job), v1::CANCELLED);
  auto cmds = k.Commands(0);
  ASSERT_EQ(cmds.size(), 1u);
  EXPECT_EQ(cmds[0].cancel_job_id(), job);
  EXPECT_TRUE(k.Info(0).closing());
  // Late words of the stopped job change nothing and are not errors.
  EXPECT_TRUE(k.Report(0, a0, false, "stopped: cancelled by the coordinator").ok());
  v1::TelemetryBatch late;
  late.set_worker_id(k.workers[1]);
  late.set_job_id(job);
  late.set_rank(1);
  v1::TelemetryAck ack;
  const Status t = k.c.IngestTelemetry(late, &ack);
  EXPECT_EQ(t.code(), Code::kFailedPrecondition);
  EXPECT_EQ(t.message(), job + " is CANCELLED: no more telemetry");
  EXPECT_EQ(k.c.GetJob(job)->failure_cause(), "");
  ASSERT_TRUE(k.Release(0, a0).ok());
  ASSERT_TRUE(k.Release(1, a1).ok());
  for (const auto& w : k.c.ListWorkers()) EXPECT_EQ(w.job_id(), "");
}

TEST(WorkerLifecycleTest, ARestartWaitsForTheFailedAttemptsWorkersToRelease) {
  Cluster k(2);
  v1::JobSpec spec = jobplan::TinySpec(2);
  spec.set_max_restarts(1);
  const std::string job = k.c.SubmitJob(spec)->job_id();
  const v1::Assignment a0 = k.Assigned(0), a1 = k.Assigned(1);
  ASSERT_TRUE(k.Report(1, a1, false, "loss is NaN at step 0").ok());
  EXPECT_EQ(k.State(job), v1::PENDING);
  EXPECT_EQ(k.c.GetJob(job)->restarts(), 1);
  ASSERT_TRUE(k.Release(1, a1).ok());
  EXPECT_EQ(k.State(job), v1::PENDING);  // worker 0 is still closing the first attempt
  ASSERT_TRUE(k.Release(0, a0).ok());
  EXPECT_EQ(k.State(job), v1::RUNNING);
  const v1::Assignment b0 = k.Assigned(0);
  EXPECT_EQ(b0.job_id(), job);
  EXPECT_GT(b0.session(), a0.session());
  // The first attempt's late report does not touch the second.
  EXPECT_TRUE(k.Report(0, a0, false, "stopped: cancelled by the coordinator").ok());
  EXPECT_EQ(k.State(job), v1::RUNNING);
}

TEST(WorkerLifecycleTest, AWorkerReRegisteringWhileClosingAJobIsBusyUntilItReleases) {
  Coordinator c;
  v1::RegisterRequest r = WorkerAt(7100);
  r.set_held_job_id("job-000042");
  r.set_held_session(42);
  const std::string w = c.Register(r)->worker_id();
  const std::string held = c.Register(WorkerAt(7101))->worker_id();
  const std::string job = c.SubmitJob(jobplan::TinySpec(2))->job_id();
  EXPECT_EQ(c.GetJob(job)->state(), v1::PENDING);
  auto workers = c.ListWorkers();
  ASSERT_EQ(workers.size(), 2u);
  const v1::WorkerInfo& info = workers[0].worker_id() == w ? workers[0] : workers[1];
  EXPECT_EQ(info.job_id(), "job-000042");
  EXPECT_TRUE(info.closing());
  v1::ReleaseJobRequest release;
  release.set_worker_id(w);
  release.set_job_id("job-000042");
  release.set_session(42);
  ASSERT_TRUE(c.ReleaseJob(release).ok());
  EXPECT_EQ(c.GetJob(job)->state(), v1::RUNNING);
  release.set_worker_id("worker-9999");
  EXPECT_EQ(c.ReleaseJob(release).code(), Code::kNotFound);
}

// pp 4: rank 3 lost its link to 2, 2 lost its link to 1, and 1 says what went wrong.
TEST(WorkerLifecycleTest, TheRecordedCauseFollowsBrokenLinksToTheRoot) {
  Cluster k(4);
  const std::string job = k.c.SubmitJob(jobplan::TinySpec(4))->job_id();
  std::vector<v1::Assignment> a;
  for (int w = 0; w < 4; ++w) a.push_back(k.Assigned(w));
  auto worker_of = [&](int rank) {
    for (int w = 0; w < 4; ++w) {
      if (a[w].rank() == rank) return w;
    }
    return -1;
  };
  ASSERT_TRUE(k.Report(worker_of(3), a[worker_of(3)], false, "link to peer 2 broke", {2}).ok());
  ASSERT_TRUE(k.Report(worker_of(0), a[worker_of(0)], false, "link to peer 1 broke", {1}).ok());
  ASSERT_TRUE(k.Report(worker_of(2), a[worker_of(2)], false, "link to peer 1 broke", {1, 3}).ok());
  k.c.Tick();
  EXPECT_EQ(k.State(job), v1::RUNNING);  // rank 1's word is awaited
  ASSERT_TRUE(k.Report(worker_of(1), a[worker_of(1)], false, "out of memory in F of micro-batch 2").ok());
  auto done = k.c.GetJob(job);
  EXPECT_EQ(done->state(), v1::FAILED);
  EXPECT_EQ(done->failed_rank(), 1);
  EXPECT_EQ(done->failure_cause(), "rank 1 (" + k.workers[worker_of(1)] + "): out of memory in F of micro-batch 2");
}

TEST(WorkerLifecycleTest, AChainEndingAtASilentRankBlamesThatRankAfterTheGrace) {
  CoordinatorOptions o;
  o.suspect_grace = std::chrono::milliseconds(20);
  Cluster k(3, o);
  const std::string job = k.c.SubmitJob(jobplan::TinySpec(3))->job_id();
  std::vector<v1::Assignment> a;
  for (int w = 0; w < 3; ++w) a.push_back(k.Assigned(w));
  // Worker w holds rank w (free workers are taken in id order).
  ASSERT_EQ(a[2].rank(), 2);
  v1::TelemetryBatch batch;  // one action measured: a lost rank now fails the job (no requeue)
  batch.set_worker_id(k.workers[2]);
  batch.set_job_id(job);
  batch.set_rank(2);
  batch.set_session(a[2].session());
  batch.add_actions()->mutable_action()->set_op(v1::F);
  v1::TelemetryAck ack;
  ASSERT_TRUE(k.c.IngestTelemetry(batch, &ack).ok());
  ASSERT_TRUE(k.Report(2, a[2], false, "link to peer 1 broke", {1}).ok());
  ASSERT_TRUE(k.Report(1, a[1], false, "link to peer 0 broke", {0, 2}).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  k.c.Tick();
  auto done = k.c.GetJob(job);
  EXPECT_EQ(done->state(), v1::FAILED);
  EXPECT_EQ(done->failed_rank(), 0);
  EXPECT_EQ(done->failure_cause(), "rank 0 (" + k.workers[0] + ", global rank 0) stopped answering its peers: rank 1 (" +
                                       k.workers[1] + "): link to peer 0 broke");
}

TEST(WorkerLifecycleTest, AWorkerLeavingBeforeTheFirstStepSendsTheJobBackToTheQueue) {
  Cluster k(3);
  const std::string job = k.c.SubmitJob(jobplan::TinySpec(2))->job_id();
  const v1::Assignment a0 = k.Assigned(0), a1 = k.Assigned(1);
  ASSERT_TRUE(k.c.Deregister(k.workers[0]).ok());
  auto j = k.c.GetJob(job);
  EXPECT_EQ(j->state(), v1::PENDING);
  EXPECT_EQ(j->restarts(), 0);
  EXPECT_EQ(j->events(j->events_size() - 1).message(),
            "back in the queue (worker " + k.workers[0] + " (rank 0) shut down, before its first step)");
  auto cmds = k.Commands(1);
  ASSERT_EQ(cmds.size(), 1u);
  EXPECT_EQ(cmds[0].cancel_job_id(), job);
  ASSERT_TRUE(k.Release(1, a1).ok());
  EXPECT_EQ(k.State(job), v1::RUNNING);  // on workers 1 and 2
  const v1::Assignment b1 = k.Assigned(1);
  EXPECT_GT(b1.session(), a1.session());
  // Once a rank has measured something, a worker leaving fails the job.
  v1::TelemetryBatch batch;
  batch.set_worker_id(k.workers[1]);
  batch.set_job_id(job);
  batch.set_rank(b1.rank());
  batch.set_session(b1.session());
  auto* t = batch.add_actions();
  t->mutable_action()->set_op(v1::F);
  t->set_step(0);
  t->set_start_ns(10);
  t->set_end_ns(20);
  v1::TelemetryAck ack;
  ASSERT_TRUE(k.c.IngestTelemetry(batch, &ack).ok());
  ASSERT_TRUE(k.c.Deregister(k.workers[2]).ok());
  EXPECT_EQ(k.State(job), v1::FAILED);
}

// Before any rank measured anything, a worker lost to its peers (silent after the grace) or to
// its lease costs the job nothing: back to the queue, no restart counted, a few times at most.
TEST(WorkerLifecycleTest, AWorkerLostBeforeTheFirstStepRequeuesTheJobAFewTimesAtMost) {
  CoordinatorOptions o;
  o.suspect_grace = std::chrono::milliseconds(1);
  Cluster k(2, o);
  const std::string job = k.c.SubmitJob(jobplan::TinySpec(2))->job_id();
  for (int round = 1; round <= 4; ++round) {
    ASSERT_EQ(k.State(job), v1::RUNNING) << round;
    const v1::Assignment a0 = k.Assigned(0), a1 = k.Assigned(1);
    ASSERT_TRUE(k.Report(0, a0, false, "Connect: rank 0 timed out waiting for rank 1", {1}).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    k.c.Tick();
    auto j = k.c.GetJob(job);
    const std::string cause = "rank 1 (" + k.workers[1] + ", global rank 1) stopped answering its peers: rank 0 (" +
                              k.workers[0] + "): Connect: rank 0 timed out waiting for rank 1";
    if (round == 4) {  // the fourth loss is final
      EXPECT_EQ(j->state(), v1::FAILED);
      EXPECT_EQ(j->failure_cause(), cause);
      break;
    }
    EXPECT_EQ(j->state(), v1::PENDING);
    EXPECT_EQ(j->restarts(), 0);
    EXPECT_EQ(j->events(j->events_size() - 1).message(), "back in the queue (" + cause + ", before its first step)");
    ASSERT_TRUE(k.Release(0, a0).ok());
    ASSERT_TRUE(k.Release(1, a1).ok());
    v1::HeartbeatRequest alive;  // the blamed worker answers: it may take work again
    alive.set_worker_id(k.workers[1]);
    ASSERT_TRUE(k.c.Heartbeat(alive).ok());
  }
}

TEST(WorkerLifecycleTest, AReleaseWithoutAReportFailsTheJobNamingTheRank) {
  Cluster k(2);
  const std::string job = k.c.SubmitJob(jobplan::TinySpec(2))->job_id();
  const v1::Assignment a0 = k.Assigned(0);
  ASSERT_TRUE(k.Release(0, a0).ok());
  auto j = k.c.GetJob(job);
  EXPECT_EQ(j->state(), v1::FAILED);
  EXPECT_EQ(j->failed_rank(), 0);
  EXPECT_EQ(j->failure_cause(), "rank 0 (" + k.workers[0] + ") left the job without reporting a result");
}

TEST(WorkerLifecycleTest, CommandsAStreamCouldNotDeliverComeFirstOnTheNextOne) {
  Cluster k(2);
  const std::string job = k.c.SubmitJob(jobplan::TinySpec(2))->job_id();
  auto cmds = k.Commands(0);
  ASSERT_EQ(cmds.size(), 1u);
  ASSERT_EQ(*k.c.CancelJob(job), v1::CANCELLED);  // queues a cancel behind the lost assignment
  k.c.ReturnCommands(k.workers[0], cmds);
  auto again = k.Commands(0);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].assign().job_id(), job);
  EXPECT_EQ(again[1].cancel_job_id(), job);
}

}  // namespace
}  // namespace pipecoord::coordinator

namespace pipecoord::coordinator {
namespace {

// A metrics sink whose Event blocks until released: the core lock stays held meanwhile (the
// coordinator calls its sink under it), as it was for seconds while a 4,096-rank step's telemetry
// was stored (bench/fleet_telemetry_bench).
class BlockingSink final : public health::MetricsSink {
 public:
  void Action(const std::string&, const health::RankLabel&, int, const std::string&, double) override {}
  void Step(const std::string&, double, double, double) override {}
  void Idle(const std::string&, const health::RankLabel&, double, double, double, double) override {}
  void Predicted(const std::string&, double, double, double, double) override {}
  void Straggler(const std::string&, const health::RankLabel&, const std::string&, double, double) override {}
  void Memory(const std::string&, const health::RankLabel&, uint64_t, uint64_t, uint64_t) override {}
  void ForgetJob(const std::string&) override {}
  void Event(const std::string&, const std::string&) override {
    std::unique_lock<std::mutex> lock(mu_);
    holding_ = true;
    held_.notify_all();
    released_.wait(lock, [&] { return released_flag_; });
  }
  void WaitUntilHolding() {
    std::unique_lock<std::mutex> lock(mu_);
    held_.wait(lock, [&] { return holding_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_flag_ = true;
    released_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable held_, released_;
  bool holding_ = false, released_flag_ = false;
};

TEST(WorkerLifecycleTest, HeartbeatsRenewLeasesWhileTheCoreIsBusy) {
  BlockingSink sink;
  CoordinatorOptions o;
  o.lease = std::chrono::milliseconds(400);
  o.metrics = &sink;
  Cluster k(2, o);
  // A submission holds the core lock inside the sink for longer than two leases.
  std::thread submit([&] { (void)k.c.SubmitJob(jobplan::TinySpec(2)); });
  sink.WaitUntilHolding();
  const auto held_since = Clock::now();
  int beats = 0;
  while (Clock::now() - held_since < std::chrono::milliseconds(1000)) {
    for (const std::string& id : k.workers) {
      v1::HeartbeatRequest r;
      r.set_worker_id(id);
      const auto t = Clock::now();
      auto answer = k.c.Heartbeat(r);
      ASSERT_TRUE(answer.ok()) << answer.status().ToString();
      // Answered at once, not behind the lock: the lease alone, no job fields.
      EXPECT_LT(Clock::now() - t, std::chrono::milliseconds(100));
      EXPECT_EQ(answer->lease_ms(), 400);
      EXPECT_TRUE(answer->job_id().empty());
      ++beats;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GE(beats, 10);
  sink.Release();
  submit.join();
  // The first tick after the lock is free finds both leases renewed by the beats it missed.
  k.c.Tick();
  EXPECT_EQ(k.c.ListWorkers().size(), 2u);
  // An unregistered id is still refused at once.
  v1::HeartbeatRequest stranger;
  stranger.set_worker_id("worker-none");
  EXPECT_EQ(k.c.Heartbeat(stranger).status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace pipecoord::coordinator
