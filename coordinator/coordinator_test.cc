// The coordinator's state machine, driven directly (the gRPC layer is tested end to end in
// tests/).
#include "coordinator/coordinator.h"
#include "coordinator/state_file_for_tests.h"

#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <tuple>

#include "jobplan/auto_plan.h"
#include "jobplan/measured_step_for_tests.h"
#include "jobplan/plan_job.h"
#include "jobplan/rebalance.h"
#include "jobplan/spec_validation.h"
#include "jobplan/telemetry_detail.h"
#include "jobplan/tiny_spec_for_tests.h"

namespace pipecoord::coordinator {
namespace {

// jobplan::ValidateJobSpec's messages: spec_validation_test.cc.

TEST(JobPlanTest, PlanCarriesShardsJobListsAndOpt) {
  auto plan = jobplan::PlanJob(jobplan::WithDefaults(jobplan::TinySpec()));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->shards_size(), 2);
  EXPECT_EQ(plan->shards(0).first_layer(), 0);
  EXPECT_EQ(plan->shards(0).num_layers(), 2);
  EXPECT_TRUE(plan->shards(0).has_embedding());
  EXPECT_TRUE(plan->shards(1).has_head());
  EXPECT_EQ(plan->shards(1).first_layer(), 2);
  ASSERT_EQ(plan->ranks_size(), 2);
  // 1f1b p=2 m=4: 8 compute + 4 sends + 4 receives + OPT, and a PROBE in rank 0's predicted
  // bubble: after its two warm-up forwards and their sends, waiting for the first backward.
  EXPECT_EQ(plan->ranks(0).actions_size(), 18);
  EXPECT_EQ(plan->ranks(0).actions(4).op(), v1::PROBE);
  EXPECT_EQ(plan->ranks(0).actions(0).op(), v1::F);
  EXPECT_EQ(plan->ranks(0).actions(1).op(), v1::SEND_F);
  EXPECT_EQ(plan->ranks(0).actions(1).peer(), 1);
  EXPECT_EQ(plan->ranks(0).actions(17).op(), v1::OPT);
  EXPECT_DOUBLE_EQ(plan->predicted_makespan(), (4 + 2 - 1) * 3.0);
  EXPECT_NEAR(plan->predicted_bubble_rate(), 1 - 2 * 12.0 / (2 * 15.0), 1e-12);
}

v1::RegisterRequest Worker(int port) {
  v1::RegisterRequest r;
  r.set_device_kind("cpu");
  r.set_host("localhost");
  r.set_data_endpoint("127.0.0.1:" + std::to_string(port));
  return r;
}

std::vector<v1::WorkerCommand> Commands(Coordinator& c, const std::string& worker) {
  std::vector<v1::WorkerCommand> out;
  EXPECT_TRUE(c.WaitCommands(worker, &out, Clock::now() + std::chrono::milliseconds(10)).ok());
  return out;
}

TEST(CoordinatorTest, TicksEveryEighthOfTheLeaseWithin25To200Ms) {
  using std::chrono::milliseconds;
  EXPECT_EQ(TickPeriod(milliseconds(5000)), milliseconds(200));  // the default lease: the 200 ms cap
  EXPECT_EQ(TickPeriod(milliseconds(1500)), milliseconds(187));
  EXPECT_EQ(TickPeriod(milliseconds(100)), milliseconds(25));
  EXPECT_EQ(TickPeriod(milliseconds(3'600'000)), milliseconds(200));
}

TEST(CoordinatorTest, SubmitWaitsForWorkersThenDispatchesEachRank) {
  Coordinator c;
  auto job = c.SubmitJob(jobplan::TinySpec());
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->job_id(), "job-000001");
  EXPECT_EQ(c.GetJob(job->job_id())->state(), v1::PENDING);
  auto w0 = c.Register(Worker(7000));
  ASSERT_TRUE(w0.ok());
  EXPECT_EQ(c.GetJob(job->job_id())->state(), v1::PENDING);
  auto w1 = c.Register(Worker(7001));
  EXPECT_EQ(c.GetJob(job->job_id())->state(), v1::RUNNING);
  auto cmds0 = Commands(c, w0->worker_id());
  auto cmds1 = Commands(c, w1->worker_id());
  ASSERT_EQ(cmds0.size(), 1u);
  ASSERT_EQ(cmds1.size(), 1u);
  const v1::Assignment& a0 = cmds0[0].assign();
  const v1::Assignment& a1 = cmds1[0].assign();
  EXPECT_EQ(a0.rank(), 0);
  EXPECT_EQ(a1.rank(), 1);
  EXPECT_EQ(a0.peers_size(), 2);
  EXPECT_EQ(a0.peers(1).data_endpoint(), "127.0.0.1:7001");
  EXPECT_EQ(a0.shards_size(), 1);
  EXPECT_TRUE(a0.shards(0).has_embedding());
  EXPECT_EQ(a0.session(), a1.session());
}

struct Running {
  Coordinator c;
  std::string job, w0, w1;
  explicit Running(CoordinatorOptions o = {}, const v1::JobSpec& spec = jobplan::TinySpec()) : c(std::move(o)) {
    job = c.SubmitJob(spec)->job_id();
    w0 = c.Register(Worker(1))->worker_id();
    w1 = c.Register(Worker(2))->worker_id();
  }
  v1::TelemetryBatch Batch(const std::string& w, int rank, int step, double loss) {
    v1::TelemetryBatch b;
    b.set_worker_id(w);
    b.set_job_id(job);
    b.set_rank(rank);
    auto* t = b.add_actions();
    t->mutable_action()->set_op(v1::F);
    t->set_step(step);
    t->set_start_ns(1000 + rank * 500);
    t->set_end_ns(2000 + rank * 500);
    auto* s = b.add_steps();
    s->set_step(step);
    s->set_loss(loss);
    s->set_has_loss(rank == 1);
    s->set_memory_peak_bytes(100 + rank);
    return b;
  }
};

// A job is never dispatched to workers that offer less memory than a rank's budget (the plan's
// memory_budget_bytes, the rank's measured peak): it waits, saying so once, until workers with
// room come; workers that report no memory are not judged.
TEST(CoordinatorTest, AJobWaitsForWorkersWithRoomForItsLargestRankBudget) {
  Coordinator c;
  const std::string job = c.SubmitJob(jobplan::TinySpec())->job_id();
  const v1::Job submitted = *c.GetJob(job);
  ASSERT_EQ(submitted.plan().memory_budget_bytes_size(), 2);
  const uint64_t need = std::max(submitted.plan().memory_budget_bytes(0), submitted.plan().memory_budget_bytes(1));
  ASSERT_GT(need, 0u);
  auto small = [&](int port, uint64_t bytes) {
    v1::RegisterRequest r = Worker(port);
    r.set_device_memory_bytes(bytes);
    return c.Register(r)->worker_id();
  };
  small(1, need - 1);
  small(2, need - 1);
  small(3, 1000);
  v1::Job waiting = *c.GetJob(job);
  EXPECT_EQ(waiting.state(), v1::PENDING);
  const std::string why = waiting.events(waiting.events_size() - 1).message();
  EXPECT_EQ(why.rfind("waiting for workers with room: its largest rank budget is ", 0), 0u) << why;
  EXPECT_NE(why.find(", 2 more worker(s) offering that much are needed"), std::string::npos) << why;
  small(4, 2000);  // another one too small: the reason is not said again
  EXPECT_EQ(c.GetJob(job)->events_size(), waiting.events_size());
  const std::string exact = small(5, need);
  EXPECT_EQ(c.GetJob(job)->state(), v1::PENDING);
  const std::string unknown = small(6, 0);
  const v1::Job running = *c.GetJob(job);
  ASSERT_EQ(running.state(), v1::RUNNING);
  EXPECT_EQ(std::vector<std::string>(running.worker_ids().begin(), running.worker_ids().end()),
            (std::vector<std::string>{exact, unknown}));
}

// A failure reported with the same message from two distinct workers is the job's own (out of
// memory, say): it is not restarted again, however many restarts are left; a different message,
// or one from the same worker, is restarted as before.
TEST(CoordinatorTest, TheSameFailureOnTwoWorkersIsNotRestarted) {
  v1::JobSpec spec = jobplan::TinySpec();
  spec.set_max_restarts(5);
  Coordinator c;
  const std::string job = c.SubmitJob(spec)->job_id();
  std::vector<std::string> workers;
  for (int port = 1; port <= 4; ++port) workers.push_back(c.Register(Worker(port))->worker_id());
  // Global rank g reports `message`; the ranks then close the attempt's links. Its worker.
  auto fail = [&](int g, const std::string& message) {
    const v1::Job j = *c.GetJob(job);
    EXPECT_EQ(j.state(), v1::RUNNING);
    v1::ReportResultRequest r;
    r.set_worker_id(j.worker_ids(g));
    r.set_job_id(job);
    r.set_rank(g);
    r.set_message(message);
    r.set_session(j.session());
    EXPECT_TRUE(c.ReportResult(r).ok());
    for (const std::string& w : j.worker_ids()) {
      v1::ReleaseJobRequest release;
      release.set_worker_id(w);
      release.set_job_id(job);
      release.set_session(j.session());
      EXPECT_TRUE(c.ReleaseJob(release).ok());
    }
    return j.worker_ids(g);
  };
  const std::string oom = "out of memory: the host could not allocate what rank 0 (dp 0) needs (std::bad_alloc)";
  const std::string first = fail(0, oom);
  EXPECT_EQ(c.GetJob(job)->restarts(), 1);
  fail(0, "something else");
  EXPECT_EQ(c.GetJob(job)->restarts(), 2);
  // Restarts keep each rank on its previous worker where it is free: the same worker again.
  ASSERT_EQ(c.GetJob(job)->worker_ids(0), first);
  fail(0, oom);  // the same worker: still one distinct worker
  EXPECT_EQ(c.GetJob(job)->restarts(), 3);
  // The same message from another worker (rank 1's): not restarted.
  const std::string second = fail(1, oom);
  const v1::Job done = *c.GetJob(job);
  EXPECT_EQ(done.state(), v1::FAILED);
  EXPECT_EQ(done.restarts(), 3);
  EXPECT_EQ(done.failure_cause(), "rank 1 (" + second + "): " + oom + " (the same failure on 2 workers: " +
                                      std::min(first, second) + ", " + std::max(first, second) + "; not restarted)");
}

TEST(CoordinatorTest, TelemetryMeasuresEachStepOnceAllRanksReport) {
  Running r;
  v1::TelemetryAck ack;
  ASSERT_TRUE(r.c.IngestTelemetry(r.Batch(r.w0, 0, 0, 0), &ack).ok());
  EXPECT_EQ(r.c.GetJob(r.job)->steps_done(), 0);
  ASSERT_TRUE(r.c.IngestTelemetry(r.Batch(r.w1, 1, 0, 4.5), &ack).ok());
  auto job = r.c.GetJob(r.job);
  ASSERT_EQ(job->steps_size(), 1);
  EXPECT_EQ(job->steps(0).loss(), 4.5);
  // Busy 2 x 1000 ns over 2 ranks x 1500 ns.
  EXPECT_DOUBLE_EQ(job->steps(0).step_time_s(), 1500e-9);
  EXPECT_NEAR(job->steps(0).measured_bubble_rate(), 1 - 2000.0 / 3000.0, 1e-12);
  EXPECT_EQ(job->steps(0).peak_memory_bytes(1), 101u);
  EXPECT_EQ(ack.actions_accepted(), 2);
  EXPECT_EQ(ack.steps_accepted(), 2);
}

TEST(CoordinatorTest, TelemetryForARankTheWorkerDoesNotHoldIsDenied) {
  Running r;
  v1::TelemetryAck ack;
  Status st = r.c.IngestTelemetry(r.Batch(r.w0, 1, 0, 0), &ack);
  EXPECT_EQ(st.code(), Code::kPermissionDenied);
  EXPECT_EQ(st.message(), "worker " + r.w0 + " does not hold rank 1 (dp 0) of " + r.job);
  auto bad_step = r.Batch(r.w0, 0, 9, 0);
  EXPECT_EQ(r.c.IngestTelemetry(bad_step, &ack).code(), Code::kInvalidArgument);
  auto other_job = r.Batch(r.w0, 0, 0, 0);
  other_job.set_job_id("job-999999");
  EXPECT_EQ(r.c.IngestTelemetry(other_job, &ack).code(), Code::kNotFound);
  EXPECT_EQ(r.c.GetJob(r.job)->state(), v1::RUNNING);  // nothing harmed the job
}

// Found by fuzz/telemetry_fuzz: a rank that resent a step's summary had the step measured again,
// and the job's records grew past its steps.
// A step sent again (a worker whose stream a coordinator restart cut cannot know it was stored)
// is acknowledged and not counted; steps out of order and bad fields are refused.
TEST(CoordinatorTest, TelemetryStepsComeInOrderEachOnceAndARefusedBatchChangesNothing) {
  Running r;
  v1::TelemetryAck ack;
  ASSERT_TRUE(r.c.IngestTelemetry(r.Batch(r.w0, 0, 0, 0), &ack).ok());
  v1::TelemetryAck again;
  ASSERT_TRUE(r.c.IngestTelemetry(r.Batch(r.w0, 0, 0, 0), &again).ok());
  EXPECT_EQ(again.actions_accepted(), 1);  // acknowledged: the coordinator has it
  EXPECT_EQ(r.c.ActionsIngested(), 1);     // not counted twice
  auto ahead = r.Batch(r.w1, 1, 0, 0);
  ahead.mutable_steps(0)->set_step(1);
  EXPECT_EQ(r.c.IngestTelemetry(ahead, &ack).message(),
            "steps: rank 1 (dp 0) reports step 0 now (steps in order, each once), got step 1");
  auto negative = r.Batch(r.w1, 1, 0, 0);
  negative.mutable_actions(0)->set_start_ns(-5);
  EXPECT_EQ(r.c.IngestTelemetry(negative, &ack).code(), Code::kInvalidArgument);
  EXPECT_EQ(ack.actions_accepted(), 1);
  EXPECT_EQ(r.c.ActionsIngested(), 1);
  ASSERT_TRUE(r.c.IngestTelemetry(r.Batch(r.w1, 1, 0, 4.5), &ack).ok());
  auto job = r.c.GetJob(r.job);
  ASSERT_EQ(job->steps_size(), 1);  // the refused batches left nothing behind
  EXPECT_DOUBLE_EQ(job->steps(0).step_time_s(), 1500e-9);
  EXPECT_EQ(r.c.ActionsIngested(), 2);
}

// ListJobs gives each job as GetJob does but without its plan and with its last step only (it
// moves the plan aside instead of copying it); the job itself is left whole.
TEST(CoordinatorTest, ListJobsGivesAJobWithoutItsPlanAndLeavesItWhole) {
  Running r;
  v1::TelemetryAck ack;
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(r.c.IngestTelemetry(r.Batch(r.w0, 0, step, 0), &ack).ok());
    ASSERT_TRUE(r.c.IngestTelemetry(r.Batch(r.w1, 1, step, 4.5 - step), &ack).ok());
  }
  const v1::Job before = *r.c.GetJob(r.job);
  ASSERT_EQ(before.steps_size(), 2);
  ASSERT_GT(before.plan().ranks_size(), 0);
  const std::vector<v1::Job> listed = r.c.ListJobs();
  ASSERT_EQ(listed.size(), 1u);
  v1::Job expected = before;
  expected.clear_plan();
  expected.clear_steps();
  *expected.add_steps() = before.steps(1);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(listed[0], expected))
      << listed[0].ShortDebugString().substr(0, 2000);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*r.c.GetJob(r.job), before));
}

// A round (the ingest thread's batches from many streams) answers each batch as one call would:
// both ranks' step 0 measured from one round, a refused batch refused alone, and a rank's second
// batch in the round left for the next (its order check needs the first counted).
TEST(CoordinatorTest, ARoundOfTelemetryAnswersEachBatchAsOneCallWould) {
  const std::string path = FreshStatePath("round");
  auto store = StateStore::Open(path);
  ASSERT_TRUE(store.ok());
  CoordinatorOptions o;
  o.store = store->get();
  Running r(o);
  v1::TelemetryBatch b0 = r.Batch(r.w0, 0, 0, 0), b1 = r.Batch(r.w1, 1, 0, 4.5), wrong = r.Batch(r.w0, 1, 0, 0),
                     b0_next = r.Batch(r.w0, 0, 1, 0);
  v1::TelemetryAck a0, a1, a_wrong, a_next;
  auto in = [](const v1::TelemetryBatch* b, v1::TelemetryAck* a) {
    Coordinator::TelemetryIn i;
    i.batch = b;
    i.ack = a;
    return i;
  };
  std::vector<Coordinator::TelemetryIn> round = {in(&b0, &a0), in(&wrong, &a_wrong), in(&b1, &a1), in(&b0_next, &a_next)};
  r.c.IngestTelemetryRound(&round);
  EXPECT_TRUE(round[0].status.ok()) << round[0].status.ToString();
  EXPECT_EQ(round[1].status.code(), Code::kPermissionDenied);
  EXPECT_TRUE(round[2].status.ok());
  EXPECT_FALSE(round[0].deferred || round[1].deferred || round[2].deferred);
  EXPECT_TRUE(round[3].deferred);  // rank 0's second batch in the round
  EXPECT_EQ(a0.actions_accepted(), 1);
  EXPECT_EQ(a_wrong.actions_accepted(), 0);
  EXPECT_EQ(a_next.actions_accepted(), 0);
  auto job = r.c.GetJob(r.job);
  ASSERT_EQ(job->steps_size(), 1);
  EXPECT_EQ(job->steps(0).loss(), 4.5);
  EXPECT_EQ(r.c.ActionsIngested(), 2);
  std::vector<Coordinator::TelemetryIn> next = {in(&b0_next, &a_next)};
  r.c.IngestTelemetryRound(&next);
  EXPECT_TRUE(next[0].status.ok()) << next[0].status.ToString();
  EXPECT_EQ(r.c.ActionsIngested(), 3);
  // Stored: the three accepted batches are the file's telemetry rows, read back by another store.
  store->reset();
  auto reopened = StateStore::Open(path);
  ASSERT_TRUE(reopened.ok());
  std::vector<std::vector<std::string>> events;
  auto loaded = (*reopened)->Load(&events);
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->telemetry.size(), 1u);
  ASSERT_EQ(loaded->telemetry[0].size(), 3u);
  EXPECT_EQ(loaded->telemetry[0][0].batch.rank(), 0);
  EXPECT_EQ(loaded->telemetry[0][1].batch.rank(), 1);
  EXPECT_EQ(loaded->telemetry[0][2].batch.steps(0).step(), 1);
}

TEST(CoordinatorTest, ResultsFinishTheJobAndFreeWorkers) {
  Running r;
  v1::ReportResultRequest ok;
  ok.set_worker_id(r.w0);
  ok.set_job_id(r.job);
  ok.set_rank(0);
  ok.set_ok(true);
  ASSERT_TRUE(r.c.ReportResult(ok).ok());
  EXPECT_EQ(r.c.GetJob(r.job)->state(), v1::RUNNING);
  ok.set_worker_id(r.w1);
  ok.set_rank(1);
  ASSERT_TRUE(r.c.ReportResult(ok).ok());
  EXPECT_EQ(r.c.GetJob(r.job)->state(), v1::SUCCEEDED);
  // Free once each has closed the job's links (worker_lifecycle_test has the details).
  for (const std::string& w : {r.w0, r.w1}) {
    v1::ReleaseJobRequest release;
    release.set_worker_id(w);
    release.set_job_id(r.job);
    release.set_session(r.c.GetJob(r.job)->worker_ids_size() > 0 ? Commands(r.c, w)[0].assign().session() : 0);
    ASSERT_TRUE(r.c.ReleaseJob(release).ok());
  }
  for (const auto& w : r.c.ListWorkers()) EXPECT_TRUE(w.job_id().empty());
  // The freed workers take the next job.
  auto next = r.c.SubmitJob(jobplan::TinySpec());
  EXPECT_EQ(r.c.GetJob(next->job_id())->state(), v1::RUNNING);
}

TEST(CoordinatorTest, AFailedRankFailsTheJobAndStopsTheOthers) {
  Running r;
  Commands(r.c, r.w0);
  v1::ReportResultRequest bad;
  bad.set_worker_id(r.w1);
  bad.set_job_id(r.job);
  bad.set_rank(1);
  bad.set_ok(false);
  bad.set_message("recv from rank 0 timed out");
  ASSERT_TRUE(r.c.ReportResult(bad).ok());
  auto job = r.c.GetJob(r.job);
  EXPECT_EQ(job->state(), v1::FAILED);
  EXPECT_EQ(job->failed_rank(), 1);
  EXPECT_EQ(job->failure_cause(), "rank 1 (" + r.w1 + "): recv from rank 0 timed out");
  auto cmds = Commands(r.c, r.w0);
  ASSERT_EQ(cmds.size(), 1u);
  EXPECT_EQ(cmds[0].cancel_job_id(), r.job);
}

v1::ReportResultRequest Failure(const Running& r, const std::string& worker, int rank, const std::string& message,
                                std::vector<int> unreachable = {}) {
  v1::ReportResultRequest bad;
  bad.set_worker_id(worker);
  bad.set_job_id(r.job);
  bad.set_rank(rank);
  bad.set_ok(false);
  bad.set_message(message);
  for (int g : unreachable) bad.add_unreachable_peers(g);
  return bad;
}

TEST(CoordinatorTest, ABrokenLinkWaitsForThePeersOwnReport) {
  Running r;
  ASSERT_TRUE(r.c.ReportResult(Failure(r, r.w0, 0, "link to peer 1 broke", {1})).ok());
  r.c.Tick();
  EXPECT_EQ(r.c.GetJob(r.job)->state(), v1::RUNNING);  // a symptom: rank 1 may say why
  ASSERT_TRUE(r.c.ReportResult(Failure(r, r.w1, 1, "loss is NaN at step 3", {0})).ok());
  auto job = r.c.GetJob(r.job);
  EXPECT_EQ(job->state(), v1::FAILED);
  EXPECT_EQ(job->failed_rank(), 1);
  EXPECT_EQ(job->failure_cause(), "rank 1 (" + r.w1 + "): loss is NaN at step 3");
}

TEST(CoordinatorTest, ABrokenLinkBlamesASilentPeerAfterTheGrace) {
  CoordinatorOptions o;
  o.suspect_grace = std::chrono::milliseconds(20);
  Running r(o);
  v1::TelemetryAck ack;
  ASSERT_TRUE(r.c.IngestTelemetry(r.Batch(r.w0, 0, 0, 0), &ack).ok());  // measured: it fails, not requeued
  ASSERT_TRUE(r.c.ReportResult(Failure(r, r.w0, 0, "link to peer 1 broke", {1})).ok());
  r.c.Tick();
  EXPECT_EQ(r.c.GetJob(r.job)->state(), v1::RUNNING);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  r.c.Tick();
  auto job = r.c.GetJob(r.job);
  EXPECT_EQ(job->state(), v1::FAILED);
  EXPECT_EQ(job->failed_rank(), 1);
  EXPECT_EQ(job->failure_cause(),
            "rank 1 (" + r.w1 + ", global rank 1) stopped answering its peers: rank 0 (" + r.w0 + "): link to peer 1 broke");
}

TEST(CoordinatorTest, AnImpossibleSuspectIsIgnored) {
  Running r;
  // Its own rank and a rank outside the job cannot be blamed: the reporter's cause stands.
  ASSERT_TRUE(r.c.ReportResult(Failure(r, r.w0, 0, "link broke", {0, 7, -1})).ok());
  auto job = r.c.GetJob(r.job);
  EXPECT_EQ(job->state(), v1::FAILED);
  EXPECT_EQ(job->failed_rank(), 0);
  EXPECT_EQ(job->failure_cause(), "rank 0 (" + r.w0 + "): link broke");
}

v1::JobSpec RestartableSpec() {
  v1::JobSpec s = jobplan::TinySpec();
  s.set_steps(6);
  s.set_checkpoint_every(2);
  s.set_max_restarts(1);
  return s;
}

TEST(CoordinatorTest, ACheckpointCountsWhenReportedLaterAndOnlyForAFinishedStep) {
  Running r({}, RestartableSpec());
  const uint64_t session = Commands(r.c, r.w0).at(0).assign().session();
  Commands(r.c, r.w1);
  v1::TelemetryAck ack;
  auto batch = [&](const std::string& w, int rank, int step) {
    auto b = r.Batch(w, rank, step, 1.0);
    b.set_session(session);
    return b;
  };
  // A checkpoint of a step not finished yet (step 1 in step 0's summary) is refused whole.
  auto early = batch(r.w0, 0, 0);
  early.mutable_steps(0)->add_checkpointed_steps(1);
  Status st = r.c.IngestTelemetry(early, &ack);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "steps[0].checkpointed_steps: must be in 0..0 (steps finished by the summary's step), got 1");
  EXPECT_EQ(r.c.GetJob(r.job)->steps_done(), 0);
  // Step 0's checkpoint written in the background and reported with step 1's summary counts.
  for (int step : {0, 1}) {
    for (int rank : {0, 1}) {
      auto b = batch(rank == 0 ? r.w0 : r.w1, rank, step);
      if (step == 1) b.mutable_steps(0)->add_checkpointed_steps(0);
      ASSERT_TRUE(r.c.IngestTelemetry(b, &ack).ok());
    }
  }
  EXPECT_EQ(r.c.GetJob(r.job)->checkpointed_steps(), 1);
}

TEST(CoordinatorTest, AFailureRestartsFromTheLastStepEveryRankCheckpointed) {
  Running r({}, RestartableSpec());
  const uint64_t first_session = Commands(r.c, r.w0).at(0).assign().session();
  Commands(r.c, r.w1);
  v1::TelemetryAck ack;
  // Rank 1 reaches step 3 (checkpointing steps 1 and 3), rank 0 step 2 (checkpointing step 1).
  for (int step = 0; step < 4; ++step) {
    for (int rank : {0, 1}) {
      if (rank == 0 && step == 3) continue;
      auto b = r.Batch(rank == 0 ? r.w0 : r.w1, rank, step, 4.0 - step);
      b.set_session(first_session);
      if (step % 2 == 1) b.mutable_steps(0)->add_checkpointed_steps(step);
      ASSERT_TRUE(r.c.IngestTelemetry(b, &ack).ok()) << step;
    }
  }
  EXPECT_EQ(r.c.GetJob(r.job)->checkpointed_steps(), 2);  // step 3 is not on rank 0 yet
  EXPECT_EQ(r.c.GetJob(r.job)->steps_done(), 3);
  ASSERT_TRUE(r.c.ReportResult(Failure(r, r.w1, 1, "loss is NaN")).ok());
  auto job = r.c.GetJob(r.job);
  EXPECT_EQ(job->state(), v1::PENDING);  // until both workers closed the first attempt's links
  for (const std::string& w : {r.w0, r.w1}) {
    v1::ReleaseJobRequest release;
    release.set_worker_id(w);
    release.set_job_id(r.job);
    release.set_session(first_session);
    ASSERT_TRUE(r.c.ReleaseJob(release).ok());
  }

  job = r.c.GetJob(r.job);
  EXPECT_EQ(job->state(), v1::RUNNING);  // restarted once both workers are free again
  EXPECT_EQ(job->restarts(), 1);
  EXPECT_EQ(job->start_step(), 2);
  EXPECT_EQ(job->steps_done(), 2);  // step 2's record belongs to the stopped attempt
  ASSERT_EQ(job->steps_size(), 2);
  EXPECT_EQ(job->steps(1).step(), 1);
  bool announced = false;
  for (const auto& e : job->events()) {
    announced |= e.message() == "restarting (1 of 1) from step 2 (its checkpoint): rank 1 (" + r.w1 + "): loss is NaN";
  }
  EXPECT_TRUE(announced);
  auto cmds = Commands(r.c, r.w0);
  ASSERT_EQ(cmds.size(), 2u);
  EXPECT_EQ(cmds[0].cancel_job_id(), r.job);  // the old attempt stops, the new one starts at step 2
  EXPECT_EQ(cmds[1].assign().start_step(), 2);
  const uint64_t second_session = cmds[1].assign().session();
  EXPECT_NE(second_session, first_session);
  const std::string w_rank0 = cmds[1].assign().rank() == 0 ? r.w0 : r.w1;

  // The old attempt's late telemetry and result are not counted; the new attempt reports step 2.
  auto stale = r.Batch(w_rank0, 0, 2, 1.0);
  stale.set_session(first_session);
  EXPECT_EQ(r.c.IngestTelemetry(stale, &ack).code(), Code::kFailedPrecondition);
  auto late = Failure(r, r.w0, cmds[1].assign().rank(), "cancelled");
  late.set_session(first_session);
  ASSERT_TRUE(r.c.ReportResult(late).ok());
  EXPECT_EQ(r.c.GetJob(r.job)->state(), v1::RUNNING);
  auto fresh = r.Batch(w_rank0, 0, 2, 1.0);
  fresh.set_session(second_session);
  EXPECT_TRUE(r.c.IngestTelemetry(fresh, &ack).ok());

  // No restarts left: the next failure is final.
  auto again = Failure(r, w_rank0, 0, "out of memory");
  again.set_session(second_session);
  ASSERT_TRUE(r.c.ReportResult(again).ok());
  job = r.c.GetJob(r.job);
  EXPECT_EQ(job->state(), v1::FAILED);
  EXPECT_EQ(job->failure_cause(), "rank 0 (" + w_rank0 + "): out of memory");
}

// A failure after every step is checkpointed on every rank (the soak's worker kills can land
// there) restarts nothing: an attempt from past the last step would have nothing to run, its
// ranks exiting at once while their peers connect to them. The job ends SUCCEEDED, no restart
// counted, the old attempt's workers told to stop.
TEST(CoordinatorTest, AFailureAfterEveryStepIsCheckpointedEndsTheJobSucceeded) {
  v1::JobSpec spec = RestartableSpec();
  spec.set_steps(2);
  spec.set_checkpoint_every(1);
  Running r({}, spec);
  const uint64_t session = Commands(r.c, r.w0).at(0).assign().session();
  Commands(r.c, r.w1);
  v1::TelemetryAck ack;
  for (int step = 0; step < 2; ++step) {
    for (int rank : {0, 1}) {
      auto b = r.Batch(rank == 0 ? r.w0 : r.w1, rank, step, 4.0 - step);
      b.set_session(session);
      b.mutable_steps(0)->add_checkpointed_steps(step);
      ASSERT_TRUE(r.c.IngestTelemetry(b, &ack).ok()) << step;
    }
  }
  ASSERT_EQ(r.c.GetJob(r.job)->checkpointed_steps(), 2);
  auto lost = Failure(r, r.w1, 1, "lost its lease");
  lost.set_session(session);
  ASSERT_TRUE(r.c.ReportResult(lost).ok());
  const v1::Job job = *r.c.GetJob(r.job);
  EXPECT_EQ(job.state(), v1::SUCCEEDED);
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(job.steps_done(), 2);
  bool said = false;
  for (const auto& e : job.events()) {
    said |= e.message().rfind("every step is checkpointed on every rank, nothing is left to run: not started again after "
                              "rank 1 (" + r.w1 + "): lost its lease", 0) == 0;
  }
  EXPECT_TRUE(said) << job.ShortDebugString().substr(0, 3000);
  const auto cmds = Commands(r.c, r.w0);
  ASSERT_FALSE(cmds.empty());
  EXPECT_EQ(cmds[0].cancel_job_id(), r.job);
}

TEST(CoordinatorTest, ABlamedWorkerGetsNoWorkUntilItHeartbeats) {
  CoordinatorOptions o;
  o.suspect_grace = std::chrono::milliseconds(20);
  Running r(o, RestartableSpec());
  const uint64_t session = Commands(r.c, r.w0).at(0).assign().session();
  v1::TelemetryAck ack;
  ASSERT_TRUE(r.c.IngestTelemetry(r.Batch(r.w0, 0, 0, 0), &ack).ok());
  ASSERT_TRUE(r.c.ReportResult(Failure(r, r.w0, 0, "link to peer 1 broke", {1})).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  r.c.Tick();
  auto job = r.c.GetJob(r.job);
  EXPECT_EQ(job->restarts(), 1);
  EXPECT_EQ(job->state(), v1::PENDING);
  for (const std::string& w : {r.w0, r.w1}) {
    v1::ReleaseJobRequest release;
    release.set_worker_id(w);
    release.set_job_id(r.job);
    release.set_session(session);
    ASSERT_TRUE(r.c.ReleaseJob(release).ok());
  }
  EXPECT_EQ(r.c.GetJob(r.job)->state(), v1::PENDING);  // rank 1's worker may be dead: not reused yet
  v1::HeartbeatRequest hb;
  hb.set_worker_id(r.w1);
  ASSERT_TRUE(r.c.Heartbeat(hb).ok());  // alive after all
  EXPECT_EQ(r.c.GetJob(r.job)->state(), v1::RUNNING);
}

// Heartbeats `survivor` until `lost` has been dropped for its silence (leases of 300 ms: a
// loaded machine may delay a 10 ms heartbeat loop, not by that much).
void OutliveLease(Coordinator& c, const std::string& survivor, const std::string& lost) {
  for (int i = 0; i < 500; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    v1::HeartbeatRequest hb;
    hb.set_worker_id(survivor);
    ASSERT_TRUE(c.Heartbeat(hb).ok());
    c.Tick();
    bool listed = false;
    for (const auto& w : c.ListWorkers()) listed |= w.worker_id() == lost;
    if (!listed) return;
  }
  FAIL() << lost << " kept its lease for 5 s";
}

TEST(CoordinatorTest, ARestartWaitsForAReplacementAndKeepsEachRanksWorker) {
  CoordinatorOptions o;
  o.lease = std::chrono::milliseconds(300);
  Coordinator c(o);
  auto job = c.SubmitJob(RestartableSpec())->job_id();
  auto w0 = c.Register(Worker(1))->worker_id();    // rank 0: lost
  auto w1 = c.Register(Worker(2))->worker_id();    // rank 1: survives
  const uint64_t session = Commands(c, w1).at(0).assign().session();
  v1::TelemetryBatch b;
  b.set_worker_id(w1);
  b.set_job_id(job);
  b.set_rank(1);
  b.set_session(session);
  auto* t = b.add_actions();
  t->mutable_action()->set_op(v1::F);
  t->set_end_ns(10);
  v1::TelemetryAck ack;
  ASSERT_TRUE(c.IngestTelemetry(b, &ack).ok());  // measured something: a restart, not a requeue
  OutliveLease(c, w1, w0);
  auto j = c.GetJob(job);
  EXPECT_EQ(j->state(), v1::PENDING);
  EXPECT_EQ(j->restarts(), 1);
  EXPECT_EQ(j->start_step(), 0);  // nothing checkpointed
  v1::ReleaseJobRequest release;
  release.set_worker_id(w1);
  release.set_job_id(job);
  release.set_session(session);
  ASSERT_TRUE(c.ReleaseJob(release).ok());
  auto w2 = c.Register(Worker(3))->worker_id();
  j = c.GetJob(job);
  EXPECT_EQ(j->state(), v1::RUNNING);
  // Registration order would put the survivor on rank 0; it keeps rank 1 (and its disk's
  // checkpoints), the replacement takes rank 0.
  ASSERT_EQ(j->worker_ids_size(), 2);
  EXPECT_EQ(j->worker_ids(0), w2);
  EXPECT_EQ(j->worker_ids(1), w1);
}

TEST(CoordinatorTest, CancelStopsWorkersAndIsFinal) {
  Running r;
  Commands(r.c, r.w0);
  EXPECT_EQ(*r.c.CancelJob(r.job), v1::CANCELLED);
  EXPECT_EQ(Commands(r.c, r.w0)[0].cancel_job_id(), r.job);
  EXPECT_EQ(*r.c.CancelJob(r.job), v1::CANCELLED);
  EXPECT_EQ(r.c.CancelJob("job-404").status().code(), Code::kNotFound);
}

TEST(CoordinatorTest, LostLeaseFailsTheJobNamingTheRank) {
  CoordinatorOptions o;
  o.lease = std::chrono::milliseconds(300);
  Coordinator c(o);
  auto job = c.SubmitJob(jobplan::TinySpec())->job_id();
  auto w0 = c.Register(Worker(1))->worker_id();
  auto w1 = c.Register(Worker(2))->worker_id();
  v1::TelemetryBatch b;  // rank 0 measured something: the job fails (before that it is requeued)
  b.set_worker_id(w0);
  b.set_job_id(job);
  b.add_actions()->mutable_action()->set_op(v1::F);
  v1::TelemetryAck ack;
  ASSERT_TRUE(c.IngestTelemetry(b, &ack).ok());
  OutliveLease(c, w0, w1);  // only worker 0 heartbeats
  auto j = c.GetJob(job);
  EXPECT_EQ(j->state(), v1::FAILED);
  EXPECT_EQ(j->failed_rank(), 1);
  EXPECT_EQ(j->failure_cause(), "worker " + w1 + " (rank 1) lost its lease");
  v1::HeartbeatRequest gone;
  gone.set_worker_id(w1);
  EXPECT_EQ(c.Heartbeat(gone).status().code(), Code::kNotFound);
}

TEST(CoordinatorTest, WatchSeesStateChangesAndSteps) {
  Running r;
  size_t cursor = 0;
  bool finished = false;
  std::vector<v1::JobUpdate> updates;
  ASSERT_TRUE(r.c.WaitJobUpdates(r.job, &cursor, &updates, Clock::now(), &finished).ok());
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0].state(), v1::PENDING);
  EXPECT_EQ(updates[1].state(), v1::RUNNING);
  EXPECT_FALSE(finished);
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    r.c.CancelJob(r.job);
  });
  updates.clear();
  ASSERT_TRUE(r.c.WaitJobUpdates(r.job, &cursor, &updates, Clock::now() + std::chrono::seconds(5), &finished).ok());
  t.join();
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].state(), v1::CANCELLED);
  EXPECT_TRUE(finished);
}

TEST(CoordinatorTest, RendezvousIsABarrier) {
  Running r;
  v1::RendezvousRequest req;
  req.set_job_id(r.job);
  req.set_key("nccl-id");
  req.set_expected(2);
  req.set_value("a");
  Result<v1::RendezvousResponse> first = Unavailable("not run");
  std::thread t([&] { first = r.c.Rendezvous(r.w0, req, Clock::now() + std::chrono::seconds(5)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  req.set_value("b");
  auto second = r.c.Rendezvous(r.w1, req, Clock::now() + std::chrono::seconds(5));
  t.join();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->values().at(r.w0), "a");
  EXPECT_EQ(first->values().at(r.w1), "b");
  EXPECT_EQ(second->values().size(), 2u);
  auto outsider = r.c.Register(Worker(3))->worker_id();
  EXPECT_EQ(r.c.Rendezvous(outsider, req, Clock::now()).status().code(), Code::kPermissionDenied);
}

// The asynchronous rendezvous (the service's): waiters on many keys, each answered with its own
// key's value when it is published and never by a put on another key; one whose key never comes is
// answered UNAVAILABLE at the first tick past its deadline. At 16,384 keys, as many as the ranks
// of a large job publishing their group ids: waiters are looked up by key (a put used to scan every
// waiter of every key), so this takes milliseconds; the time is printed, not asserted.
TEST(CoordinatorTest, AsyncRendezvousAnswersEachKeysWaitersWithItsValue) {
  Running r;
  constexpr int kKeys = 16384;
  std::vector<std::string> got(kKeys);
  std::vector<int> answers(kKeys, 0);
  int publisher_answers = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  const auto t0 = std::chrono::steady_clock::now();
  v1::RendezvousRequest req;
  req.set_job_id(r.job);
  req.set_expected(1);
  for (int k = 0; k < kKeys; ++k) {  // rank 1 waits on every key first
    req.set_key("group-" + std::to_string(k));
    r.c.RendezvousAsync(r.w1, req, deadline, [&, k](Result<v1::RendezvousResponse> a) {
      ++answers[k];
      if (a.ok() && a->values_size() == 1) got[k] = a->values().begin()->second;
    });
  }
  Result<v1::RendezvousResponse> never = Unavailable("not answered");
  req.set_key("never");
  r.c.RendezvousAsync(r.w1, req, Clock::now() + std::chrono::milliseconds(10),
                      [&](Result<v1::RendezvousResponse> a) { never = std::move(a); });
  for (int k = kKeys - 1; k >= 0; --k) {  // then rank 0 publishes them, last first
    req.set_key("group-" + std::to_string(k));
    req.set_value("id-" + std::to_string(k));
    r.c.RendezvousAsync(r.w0, req, deadline, [&](Result<v1::RendezvousResponse> a) { publisher_answers += a.ok(); });
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (int k = 0; k < kKeys; ++k) {
    ASSERT_EQ(answers[k], 1) << "key " << k;
    ASSERT_EQ(got[k], "id-" + std::to_string(k)) << "key " << k;
  }
  EXPECT_EQ(publisher_answers, kKeys);
  EXPECT_EQ(never.status().message(), "not answered");  // not before its deadline and a tick
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  r.c.Tick();
  EXPECT_EQ(never.status().code(), Code::kUnavailable);
  std::printf("%d keys: %d waiters and %d publishers answered in %.1f ms\n", kKeys, kKeys, kKeys, ms);
}

TEST(CoordinatorTest, RegisterRefusesBadEndpoints) {
  Coordinator c;
  v1::RegisterRequest r = Worker(1);
  r.set_data_endpoint("nowhere");
  EXPECT_EQ(c.Register(r).status().message(), "data_endpoint: must be HOST:PORT, got \"nowhere\"");
  r = Worker(1);
  r.set_device_kind("tpu");
  EXPECT_EQ(c.Register(r).status().code(), Code::kInvalidArgument);
}

TEST(CoordinatorTest, TraceIsValidShapedJson) {
  Running r;
  v1::TelemetryAck ack;
  ASSERT_TRUE(r.c.IngestTelemetry(r.Batch(r.w0, 0, 0, 0), &ack).ok());
  auto trace = r.c.Trace(r.job);
  ASSERT_TRUE(trace.ok());
  EXPECT_NE(trace->find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(trace->find("\"name\": \"F mb0 s0\""), std::string::npos);
  EXPECT_NE(trace->find("predicted idle"), std::string::npos);
}

// Schedule "auto": planned for the free workers, the resolved spec and report stored; a dry run
// answers the same and stores nothing.
v1::JobSpec AutoTinySpec() {
  v1::JobSpec s = jobplan::TinySpec(0, "auto");
  s.set_microbatches(0);
  s.set_micro_batch_size(0);
  s.set_global_batch(8);
  return s;
}

TEST(CoordinatorAutoTest, DryRunPlansForTheFreeWorkersAndStoresNothing) {
  Coordinator c;
  auto none = c.SubmitJob(AutoTinySpec(), /*dry_run=*/true);
  EXPECT_EQ(none.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(none.status().message(),
            "spec.schedule: \"auto\" plans for the free workers, and no cpu worker is free now (pipectl workers)");
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(c.Register(Worker(7100 + i)).ok());
  auto dry = c.SubmitJob(AutoTinySpec(), /*dry_run=*/true);
  ASSERT_TRUE(dry.ok()) << dry.status().ToString();
  EXPECT_EQ(dry->job_id(), "");
  EXPECT_TRUE(c.ListJobs().empty());
  // What jobplan::PlanAuto chooses for 4 free workers (auto_plan_test pins it), resolved.
  auto expected = jobplan::PlanAuto(AutoTinySpec(), {4, 0, "cpu"});
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(dry->spec().SerializeAsString(), expected->spec.SerializeAsString());
  EXPECT_EQ(dry->auto_plan().SerializeAsString(), expected->report.SerializeAsString());
  EXPECT_EQ(dry->spec().schedule(), "zbh1");
  EXPECT_EQ(dry->spec().pp(), 4);
  EXPECT_DOUBLE_EQ(dry->predicted_bubble_rate(), expected->plan.predicted_bubble_rate());
  EXPECT_EQ(dry->auto_plan().workers(), 4);
  // A dry run of a fixed schedule answers its plan too, and stores nothing either.
  auto fixed = c.SubmitJob(jobplan::TinySpec(), /*dry_run=*/true);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->spec().dp(), 1);  // defaults applied
  EXPECT_FALSE(fixed->has_auto_plan());
  EXPECT_TRUE(c.ListJobs().empty());

  // For real: stored resolved, with the report, and dispatched to the 4 workers.
  auto job = c.SubmitJob(AutoTinySpec());
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->job_id(), "job-000001");
  auto stored = c.GetJob(job->job_id());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->spec().schedule(), "zbh1");
  EXPECT_EQ(stored->auto_plan().SerializeAsString(), dry->auto_plan().SerializeAsString());
  EXPECT_EQ(stored->plan().memory_budget_bytes_size(), 4);
  EXPECT_EQ(stored->state(), v1::RUNNING);
  EXPECT_EQ(stored->events(0).message(), "submitted: zbh1 (chosen by \"auto\"), pp 4, dp 1, waiting for 4 worker(s)");
}

TEST(CoordinatorAutoTest, NothingFitsTheWorkersMemory) {
  Coordinator c;
  v1::RegisterRequest w = Worker(7200);
  w.set_device_memory_bytes(300 << 10);
  ASSERT_TRUE(c.Register(w).ok());
  auto r = c.SubmitJob(AutoTinySpec());
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(r.status().message(),
            "spec.schedule: \"auto\" found no strategy that fits in memory: rank 0 needs 1.2 MiB, workers report "
            "300.0 KiB (the leanest of 24 strategies for 1 cpu worker(s): 1f1b, pp 1, vpp 1, dp 1, 8 micro-batches of 1)");
  // 1.2 MiB: the plan's budget of that strategy, 1232704 bytes (1f1b on one rank, 8 x 1 sample).
  v1::JobSpec leanest = jobplan::TinySpec(1, "1f1b");
  leanest.set_microbatches(8);
  leanest.set_micro_batch_size(1);
  EXPECT_EQ(jobplan::PlanJob(jobplan::WithDefaults(leanest))->memory_budget_bytes(0), 1232704u);
  EXPECT_TRUE(c.ListJobs().empty());
  // Bad input is still INVALID_ARGUMENT, before any planning.
  v1::JobSpec bad = AutoTinySpec();
  bad.set_global_batch(0);
  EXPECT_EQ(c.SubmitJob(bad, true).status().code(), Code::kInvalidArgument);
}

// --- Calibration, the idle split and rebalance (issue 14 sections 4 and 5), from telemetry that
// simulating the plan's lists with known per-layer costs produces (deterministic).

struct SimulatedRun {
  Coordinator c;
  std::string job;
  std::vector<std::string> workers;
  v1::JobSpec spec;
  v1::Plan plan;
  explicit SimulatedRun(const v1::JobSpec& raw) {
    auto submitted = c.SubmitJob(raw);
    EXPECT_TRUE(submitted.ok()) << submitted.status().ToString();
    job = submitted->job_id();
    const v1::Job j = *c.GetJob(job);
    spec = j.spec();
    plan = j.plan();
    for (int g = 0; g < jobplan::LayoutOf(spec).world(); ++g) workers.push_back(c.Register(Worker(9000 + g))->worker_id());
  }
  // Step `step` with every action as `d` times it, the ranks' batches in rank order, each sent as
  // a worker daemon sends it (jobplan::PutStepTimings: whole or folded per the spec's health).
  // `peak`: each rank's memory_peak_bytes.
  void Step(int step, const schedules::ActionDurations& d, uint64_t peak = 0) {
    const jobplan::StepActions actions = jobplan::SimulatedStep(spec, plan, d, step, 1'000'000'000LL * (step + 1));
    const RankLayout layout = jobplan::LayoutOf(spec);
    for (size_t g = 0; g < actions.size(); ++g) {
      v1::TelemetryBatch b;
      b.set_worker_id(workers[g]);
      b.set_job_id(job);
      const RankCoords at = layout.Coords(static_cast<int>(g));
      b.set_rank(at.pp);
      b.set_dp_rank(at.dp);
      b.set_tp_rank(at.tp);
      jobplan::PutStepTimings(jobplan::TelemetryDetailOf(spec), at.dp, at.tp, step, actions[g], &b);
      b.add_steps()->set_step(step);
      b.mutable_steps(0)->set_memory_peak_bytes(peak);
      v1::TelemetryAck ack;
      ASSERT_TRUE(c.IngestTelemetry(b, &ack).ok()) << step;
      stored_records += b.actions_size() + b.totals_size();
    }
  }
  int64_t stored_records = 0;  // actions and totals sent
};

constexpr double kMs = 1e-3;

v1::JobSpec FourRanks(const std::string& schedule, std::vector<int> stage_layers = {}) {
  v1::JobSpec s = jobplan::TinySpec(4, schedule);
  s.mutable_model()->set_layers(8);
  s.set_microbatches(8);
  s.set_steps(8);
  for (int l : stage_layers) s.add_stage_layers(l);
  return s;
}

TEST(CalibrationCoordinatorTest, UnevenStageLayersShowAsImbalanceAndRebalanceRemovesMostOfIt) {
  SimulatedRun run(FourRanks("1f1b", {1, 1, 1, 5}));
  const auto d = jobplan::PlanDurations(run.spec, run.plan, 1 * kMs, 1 * kMs, 1 * kMs, 0.2 * kMs, 0.1 * kMs);
  for (int step = 0; step < 3; ++step) run.Step(step, d);
  v1::Job job = *run.c.GetJob(run.job);
  EXPECT_FALSE(job.has_calibration());  // step 0 is warm-up: steps 1 and 2 measured so far
  EXPECT_EQ(job.steps(2).idle_size(), 0);
  EXPECT_EQ(job.steps(2).predicted_bubble_rate(), job.plan().predicted_bubble_rate());
  for (int step = 3; step < 5; ++step) run.Step(step, d);
  job = *run.c.GetJob(run.job);
  ASSERT_TRUE(job.has_calibration());
  EXPECT_EQ(job.calibration().steps_measured(), 3);
  EXPECT_NEAR(job.calibration().stage_f_s(3), 5 * kMs, 1e-9);
  EXPECT_NEAR(job.calibration().comm_s(), 0.1 * kMs, 1e-9);
  const v1::StepRecord& rec = job.steps(4);
  // Measured exactly as the calibration predicts: no variation, the prediction is the step.
  EXPECT_NEAR(rec.predicted_step_s(), rec.step_time_s(), 1e-8);
  EXPECT_NEAR(rec.predicted_bubble_rate(), rec.measured_bubble_rate(), 1e-6);
  ASSERT_EQ(rec.idle_size(), 4);
  const v1::IdleSplit& t = rec.idle_total();
  EXPECT_GT(t.imbalance_s(), t.inherent_s());
  EXPECT_GT(t.imbalance_s(), t.comm_s());
  EXPECT_NEAR(t.variation_s(), 0, 1e-6);
  double idle = 0;
  for (const v1::RankIdle& r : rec.idle()) idle += r.idle_s();
  EXPECT_NEAR(t.inherent_s() + t.imbalance_s() + t.comm_s() + t.variation_s(), idle, 1e-9);
  EXPECT_NEAR(idle, rec.measured_bubble_rate() * 4 * rec.step_time_s(), 1e-9);
  // The proposal evens the layers; simulated with the same per-layer costs it removes most of
  // the imbalance idle, cross-checked against the calibration rebuilt from the same steps.
  ASSERT_TRUE(job.has_rebalance());
  const v1::RebalanceProposal& p = job.rebalance();
  EXPECT_EQ(p.stage_layers_size(), 4);
  int sum = 0;
  for (int l : p.stage_layers()) sum += l;
  EXPECT_EQ(sum, 8);
  EXPECT_GT(p.gain(), 0.2);
  EXPECT_NEAR(p.gain(), 1 - p.proposed_step_s() / p.current_step_s(), 1e-12);
  std::vector<jobplan::StepActions> steps;
  for (int step = 1; step <= 3; ++step) steps.push_back(jobplan::SimulatedStep(run.spec, run.plan, d, step, 0));
  const jobplan::CalibratedJob cal =
      jobplan::Calibrate(run.spec, run.plan, jobplan::MeasureCosts(run.spec, run.plan, steps).value()).value();
  const jobplan::LayerCostModel model(run.spec, run.plan, cal);
  const double before = model.Predict({1, 1, 1, 5})->imbalance_idle_s;
  const double after = model.Predict({p.stage_layers().begin(), p.stage_layers().end()})->imbalance_idle_s;
  EXPECT_NEAR(before, t.imbalance_s(), 1e-9);
  EXPECT_LT(after, 0.25 * before);
  bool event = false;
  for (const v1::HealthEvent& e : job.events()) event |= e.message().rfind("calibrated on 3 measured step(s)", 0) == 0;
  EXPECT_TRUE(event);
}

// A proposal must predict more gain than the step time varied over the calibration steps: the
// same uneven job, its calibration steps measured with the step time varying by half the clean
// run's predicted gain, is proposed the same layout; varying by 1.5 times that gain, nothing.
TEST(CalibrationCoordinatorTest, ARebalanceIsProposedOnlyWhenItsGainBeatsTheMeasuredNoise) {
  auto run_with = [](double jitter, v1::Job* out) {
    SimulatedRun run(FourRanks("1f1b", {2, 2, 1, 3}));
    for (int step = 0; step < 5; ++step) {
      const double s = step == 2 ? 1 + jitter : 1.0;  // one calibration step (1-3) slower
      run.Step(step, jobplan::PlanDurations(run.spec, run.plan, s * kMs, s * kMs, s * kMs, s * 0.2 * kMs, s * 0.1 * kMs));
    }
    *out = *run.c.GetJob(run.job);
  };
  v1::Job clean;
  run_with(0, &clean);
  ASSERT_TRUE(clean.has_calibration());
  ASSERT_TRUE(clean.has_rebalance());
  const double gain = clean.rebalance().gain();
  ASSERT_GT(gain, 0.02);
  v1::Job quiet, noisy;
  run_with(0.5 * gain, &quiet);
  run_with(1.5 * gain, &noisy);
  ASSERT_TRUE(quiet.has_rebalance());
  EXPECT_EQ(std::vector<int>(quiet.rebalance().stage_layers().begin(), quiet.rebalance().stage_layers().end()),
            std::vector<int>(clean.rebalance().stage_layers().begin(), clean.rebalance().stage_layers().end()));
  EXPECT_NE(quiet.rebalance().reason().find("> the step-time noise"), std::string::npos) << quiet.rebalance().reason();
  ASSERT_TRUE(noisy.has_calibration());
  EXPECT_FALSE(noisy.has_rebalance()) << "gain " << noisy.rebalance().gain() << " within noise " << 1.5 * gain;
}

TEST(CalibrationCoordinatorTest, ASlowRankShowsAsVariationNamingIt) {
  SimulatedRun run(FourRanks("zbh1"));
  const auto d = jobplan::PlanDurations(run.spec, run.plan, 1 * kMs, 1 * kMs, 1 * kMs, 0.2 * kMs, 0.1 * kMs);
  for (int step = 0; step < 5; ++step) run.Step(step, d);
  // Rank 2 computes 3x slower from step 5 on (calibrated on steps 1-3 already).
  run.Step(5, jobplan::PlanDurations(run.spec, run.plan, 1 * kMs, 1 * kMs, 1 * kMs, 0.2 * kMs, 0.1 * kMs, 2, 3));
  const v1::Job job = *run.c.GetJob(run.job);
  const v1::StepRecord& rec = job.steps(5);
  const v1::IdleSplit& t = rec.idle_total();
  EXPECT_EQ(t.cause_rank(), 2);
  EXPECT_GT(t.variation_s(), t.inherent_s());
  EXPECT_GT(t.variation_s(), t.imbalance_s() + t.comm_s());
  EXPECT_EQ(rec.idle(3).split().cause_rank(), 2);  // rank 3 waits for rank 2's forwards
  EXPECT_GT(rec.idle(3).split().variation_s(), 0);
  EXPECT_GT(rec.step_time_s(), 1.5 * rec.predicted_step_s());
  EXPECT_FALSE(job.has_rebalance());  // even stages: nothing to move
}

TEST(CalibrationCoordinatorTest, ACleanEvenJobIsMostlyTheSchedulesOwnBubble) {
  SimulatedRun run(FourRanks("1f1b"));
  const auto d = jobplan::PlanDurations(run.spec, run.plan, 1 * kMs, 1 * kMs, 1 * kMs, 0.05 * kMs, 0.02 * kMs);
  for (int step = 0; step < 6; ++step) run.Step(step, d);
  const v1::StepRecord& rec = run.c.GetJob(run.job)->steps(5);
  const v1::IdleSplit& t = rec.idle_total();
  EXPECT_GT(t.inherent_s(), 4 * (std::abs(t.imbalance_s()) + t.comm_s() + std::abs(t.variation_s())));
  EXPECT_EQ(t.cause_rank(), -1);
  // 1F1B p 4, m 8, F + B + W = 6 ms per layer pair: (8 + 3) x 6 ms of schedule, 3 x 6 ms idle
  // per rank with equal stages.
  EXPECT_NEAR(t.inherent_s(), 4 * 3 * 6 * kMs, 1e-9);
}

// --- Telemetry detail (issue 29): workers fold the steps no check reads action by action into
// per-kind totals, and a tensor-parallel group may speak through its rank 0; the same simulated
// telemetry sent whole (the reference) and sent so must give the same records and events.

v1::JobSpec WithDetail(v1::JobSpec s, int every, const std::string& tp_speaker = "") {
  s.mutable_health()->set_detail_every(every);
  s.mutable_health()->set_tp_speaker(tp_speaker);
  return s;
}

// A job's health events of `kind`, as (global rank by pipeline rank, dp and tp, step).
std::vector<std::tuple<int, int, int, int>> EventsOf(const v1::Job& job, v1::EventKind kind) {
  std::vector<std::tuple<int, int, int, int>> out;
  for (const v1::HealthEvent& e : job.events()) {
    if (e.kind() == kind) out.emplace_back(e.rank(), e.dp_rank(), e.tp_rank(), e.step());
  }
  return out;
}

TEST(TelemetryDetailTest, FoldedStepsAreMeasuredAsTheirWholeSelves) {
  SimulatedRun whole(FourRanks("zbh1")), folded(WithDetail(FourRanks("zbh1"), 3));
  const auto d = jobplan::PlanDurations(whole.spec, whole.plan, 1 * kMs, 1 * kMs, 1 * kMs, 0.2 * kMs, 0.1 * kMs);
  for (int step = 0; step < 8; ++step) {
    whole.Step(step, d);
    folded.Step(step, d);
  }
  const v1::Job a = *whole.c.GetJob(whole.job), b = *folded.c.GetJob(folded.job);
  ASSERT_EQ(a.steps_size(), 8);
  ASSERT_EQ(b.steps_size(), 8);
  // Steps 0-3 (warm-up and calibration) and every 3rd step are whole; 4, 5 and 7 folded.
  const jobplan::TelemetryDetail detail = jobplan::TelemetryDetailOf(folded.spec);
  for (int step = 0; step < 8; ++step) {
    SCOPED_TRACE(step);
    EXPECT_EQ(detail.InDetail(step), step < 4 || step % 3 == 0);
    EXPECT_EQ(b.steps(step).step_time_s(), a.steps(step).step_time_s());
    EXPECT_DOUBLE_EQ(b.steps(step).measured_bubble_rate(), a.steps(step).measured_bubble_rate());
    EXPECT_EQ(b.steps(step).predicted_step_s(), a.steps(step).predicted_step_s());
    // The idle split needs each action: on whole steps once calibrated (at step 3).
    EXPECT_EQ(a.steps(step).idle_size(), step >= 3 ? 4 : 0);
    EXPECT_EQ(b.steps(step).idle_size(), step >= 3 && detail.InDetail(step) ? 4 : 0);
  }
  ASSERT_TRUE(a.has_calibration());
  EXPECT_EQ(b.calibration().SerializeAsString(), a.calibration().SerializeAsString());
  EXPECT_EQ(whole.c.ActionsIngested(), folded.c.ActionsIngested());  // every action timed, once
  EXPECT_LT(folded.stored_records, whole.stored_records * 3 / 4);
}

TEST(TelemetryDetailTest, AStragglerIsFlaggedAtTheSameStepFromFoldedSteps) {
  v1::JobSpec spec = FourRanks("1f1b");
  spec.set_steps(16);
  // Past the first 4 steps (warm-up and calibration) none is whole: the slowdown shows in totals only.
  SimulatedRun whole(spec), folded(WithDetail(spec, 1000));
  for (int step = 0; step < 16; ++step) {
    const auto d = jobplan::PlanDurations(whole.spec, whole.plan, 1 * kMs, 1 * kMs, 1 * kMs, 0.2 * kMs, 0.1 * kMs,
                                          step >= 6 ? 2 : -1, 2.0);
    whole.Step(step, d);
    folded.Step(step, d);
  }
  const auto want = EventsOf(*whole.c.GetJob(whole.job), v1::STRAGGLER);
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(std::get<0>(want[0]), 2);
  EXPECT_EQ(EventsOf(*folded.c.GetJob(folded.job), v1::STRAGGLER), want);
}

TEST(TelemetryDetailTest, ProbesAndMemoryAreCheckedOnEveryStep) {
  SimulatedRun whole(FourRanks("1f1b")), folded(WithDetail(FourRanks("1f1b"), 4));
  const auto d = jobplan::PlanDurations(whole.spec, whole.plan, 1 * kMs, 1 * kMs, 1 * kMs, 0.2 * kMs, 0.1 * kMs);
  const uint64_t over = 2 * *std::max_element(whole.plan.memory_budget_bytes().begin(), whole.plan.memory_budget_bytes().end());
  for (int step = 0; step < 8; ++step) {
    whole.Step(step, d, step == 5 ? over : 0);  // step 5 is folded
    folded.Step(step, d, step == 5 ? over : 0);
  }
  const v1::Job a = *whole.c.GetJob(whole.job), b = *folded.c.GetJob(folded.job);
  const auto memory = EventsOf(a, v1::MEMORY);
  ASSERT_EQ(memory.size(), 4u);  // every rank, at step 5
  EXPECT_EQ(std::get<3>(memory[0]), 5);
  EXPECT_EQ(EventsOf(b, v1::MEMORY), memory);
  // PROBEs travel whole in folded steps: each one checked (the simulated checksums are 0, so
  // the known-answer check raises its SDC at the first probe of each rank, in both).
  int probes = 0;
  for (const v1::RankJobs& r : whole.plan.ranks()) {
    for (const v1::Action& act : r.actions()) probes += act.op() == v1::PROBE;
  }
  ASSERT_GT(probes, 0);
  EXPECT_EQ(whole.c.JobHealth(whole.job)->probes_checked, 8 * probes);
  EXPECT_EQ(folded.c.JobHealth(folded.job)->probes_checked, 8 * probes);
  EXPECT_EQ(EventsOf(b, v1::SDC), EventsOf(a, v1::SDC));
  EXPECT_FALSE(EventsOf(a, v1::SDC).empty());
}

// The bubble check reads whole steps; a rank is flagged after kBubblePersistence checked steps
// over the limit in a row, so every 3rd step whole flags the same ranks 3 x (persistence - 1)
// steps after the slowdown instead of persistence - 1.
TEST(TelemetryDetailTest, TheBubbleCheckReadsTheWholeSteps) {
  v1::JobSpec spec = FourRanks("zbh1");
  spec.set_steps(16);
  spec.mutable_health()->set_bubble_min_s(0.001);  // the simulated step is 55 ms
  spec.mutable_health()->set_bubble_slack(0.05);
  SimulatedRun whole(spec), folded(WithDetail(spec, 3));
  for (int step = 0; step < 16; ++step) {
    // Rank 2 three times slower from step 6 (whole in both runs) on.
    const auto d = jobplan::PlanDurations(whole.spec, whole.plan, 1 * kMs, 1 * kMs, 1 * kMs, 0.2 * kMs, 0.1 * kMs,
                                          step >= 6 ? 2 : -1, 3.0);
    whole.Step(step, d);
    folded.Step(step, d);
  }
  const auto a = EventsOf(*whole.c.GetJob(whole.job), v1::BUBBLE);
  const auto b = EventsOf(*folded.c.GetJob(folded.job), v1::BUBBLE);
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(std::get<3>(a[i]), 6 + health::kBubblePersistence - 1);
    EXPECT_EQ(std::get<3>(b[i]), 6 + 3 * (health::kBubblePersistence - 1));
    EXPECT_EQ(std::get<0>(b[i]), std::get<0>(a[i]));
  }
}

TEST(TelemetryDetailTest, ATensorParallelGroupSpeaksThroughItsRankZero) {
  v1::JobSpec spec = FourRanks("1f1b");
  spec.set_tp(2);
  spec.set_steps(16);
  SimulatedRun every(WithDetail(spec, 1, "off")), speaker(WithDetail(spec, 1, "on"));
  ASSERT_EQ(every.workers.size(), 8u);
  for (int step = 0; step < 16; ++step) {
    // Pipeline rank 2's tp group (lockstep: both shards) twice slower from step 6.
    const auto d = jobplan::PlanDurations(every.spec, every.plan, 1 * kMs, 1 * kMs, 1 * kMs, 0.2 * kMs, 0.1 * kMs,
                                          step >= 6 ? 2 : -1, 2.0);
    every.Step(step, d);
    speaker.Step(step, d);
  }
  const v1::Job a = *every.c.GetJob(every.job), b = *speaker.c.GetJob(speaker.job);
  ASSERT_EQ(b.steps_size(), 16);
  for (int step = 0; step < 16; ++step) {
    SCOPED_TRACE(step);
    EXPECT_EQ(b.steps(step).step_time_s(), a.steps(step).step_time_s());
    EXPECT_DOUBLE_EQ(b.steps(step).measured_bubble_rate(), a.steps(step).measured_bubble_rate());
    EXPECT_EQ(b.steps(step).idle_size(), a.steps(step).idle_size());
  }
  EXPECT_EQ(b.calibration().SerializeAsString(), a.calibration().SerializeAsString());
  EXPECT_EQ(speaker.stored_records * 2, every.stored_records);
  // The reference flags both shards of the slow group; the speaker's run its rank 0.
  const auto all = EventsOf(a, v1::STRAGGLER);
  std::vector<std::tuple<int, int, int, int>> shard0;
  for (const auto& e : all) {
    EXPECT_EQ(std::get<0>(e), 2);
    if (std::get<2>(e) == 0) shard0.push_back(e);
  }
  ASSERT_FALSE(shard0.empty());
  EXPECT_EQ(EventsOf(b, v1::STRAGGLER), shard0);
}

// Past 512 ranks only replica 0 sends whole steps (detailReplicas "first"): the calibration, idle
// split and bubble check read its pipeline as the job of one replica (the replicas run alike).
// Equal but for rounding: sums over one replica's ranks or over all of them differ in the last bits.
bool NearlyEqual(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  google::protobuf::util::DefaultFieldComparator near;
  near.set_float_comparison(google::protobuf::util::DefaultFieldComparator::APPROXIMATE);
  near.SetDefaultFractionAndMargin(1e-9, 1e-15);
  google::protobuf::util::MessageDifferencer diff;
  diff.set_field_comparator(&near);
  std::string report;
  diff.ReportDifferencesToString(&report);
  const bool same = diff.Compare(a, b);
  if (!same) ADD_FAILURE() << report;
  return same;
}

TEST(TelemetryDetailTest, TheFirstReplicaAloneCalibratesAndIsSplitAsTheWholeJob) {
  v1::JobSpec spec = FourRanks("zbh1");
  spec.set_dp(2);
  spec.set_steps(16);
  spec.mutable_health()->set_bubble_min_s(0.001);
  spec.mutable_health()->set_bubble_slack(0.05);
  v1::JobSpec first = spec;
  first.mutable_health()->set_detail_replicas("first");
  SimulatedRun whole(spec), replica0(first);
  for (int step = 0; step < 16; ++step) {
    const auto d = jobplan::PlanDurations(whole.spec, whole.plan, 1 * kMs, 1 * kMs, 1 * kMs, 0.2 * kMs, 0.1 * kMs,
                                          step >= 6 ? 2 : -1, 3.0);
    whole.Step(step, d);
    replica0.Step(step, d);
  }
  const v1::Job a = *whole.c.GetJob(whole.job), b = *replica0.c.GetJob(replica0.job);
  ASSERT_EQ(b.steps_size(), 16);
  ASSERT_TRUE(b.has_calibration());
  EXPECT_TRUE(NearlyEqual(b.calibration(), a.calibration()));
  for (int step = 0; step < 16; ++step) {
    SCOPED_TRACE(step);
    EXPECT_EQ(b.steps(step).step_time_s(), a.steps(step).step_time_s());
    EXPECT_DOUBLE_EQ(b.steps(step).measured_bubble_rate(), a.steps(step).measured_bubble_rate());
    EXPECT_NEAR(b.steps(step).predicted_step_s(), a.steps(step).predicted_step_s(), 1e-12);
    ASSERT_EQ(a.steps(step).idle_size(), step >= 3 ? 8 : 0);
    ASSERT_EQ(b.steps(step).idle_size(), step >= 3 ? 4 : 0);  // replica 0's ranks
    for (int g = 0; g < b.steps(step).idle_size(); ++g) {
      EXPECT_TRUE(NearlyEqual(b.steps(step).idle(g), a.steps(step).idle(g)));
    }
  }
  std::vector<std::tuple<int, int, int, int>> want;
  for (const auto& e : EventsOf(a, v1::BUBBLE)) {
    if (std::get<1>(e) == 0) want.push_back(e);
  }
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(EventsOf(b, v1::BUBBLE), want);
  EXPECT_EQ(EventsOf(b, v1::STRAGGLER), EventsOf(a, v1::STRAGGLER));  // from totals: every replica
  EXPECT_LT(replica0.stored_records, whole.stored_records * 3 / 5);
}

// Schedule "best": the stored spec names the winner, and the job keeps that "best" chose it, with
// the runners-up (pipectl status shows them); a named schedule has none.
TEST(CoordinatorTest, BestKeepsItsRankingBesideTheJob) {
  Coordinator c;
  auto job = c.SubmitJob(jobplan::TinySpec(2, "best"));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_GT(job->best().ranked_size(), 1);
  EXPECT_EQ(job->best().ranked(0).schedule(), job->spec().schedule());
  EXPECT_EQ(job->best().ranked(0).vpp(), job->spec().vpp());
  EXPECT_EQ(job->best().ranked(0).predicted_makespan(), job->predicted_makespan());
  auto stored = c.GetJob(job->job_id());
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->best().SerializeAsString(), job->best().SerializeAsString());
  auto named = c.SubmitJob(jobplan::TinySpec(2, "1f1b"));
  ASSERT_TRUE(named.ok());
  EXPECT_FALSE(named->has_best());
  EXPECT_FALSE(c.GetJob(named->job_id())->has_best());
}

}  // namespace
}  // namespace pipecoord::coordinator
