// The coordinator's side of in-place recovery (docs/operations.md, "A lost rank"), driven
// directly: who is halted, when the spare gets its assignment, where the job resumes, how the lost
// rank's step records are completed, and when it does not recover in place and why.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <thread>

#include "coordinator/coordinator.h"
#include "jobplan/layout.h"
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

// A pp 2 x dp 2 job on four of `workers` registered workers, with helpers acting as their daemons.
struct Cluster {
  Coordinator c;
  std::vector<std::string> workers;
  std::string job;
  std::map<std::string, v1::Assignment> assigned;  // by worker
  explicit Cluster(int n, int dp = 2, CoordinatorOptions options = {}, int max_restarts = 0) : c(std::move(options)) {
    for (int i = 0; i < n; ++i) workers.push_back(c.Register(WorkerAt(7000 + i))->worker_id());
    v1::JobSpec spec = jobplan::TinySpec(2);
    spec.set_dp(dp);
    spec.set_steps(20);
    spec.set_max_restarts(max_restarts);
    job = c.SubmitJob(spec)->job_id();
    for (const std::string& w : workers) Drain(w);
  }
  v1::Job Job() { return *c.GetJob(job); }
  std::string WorkerOf(int g) { return Job().worker_ids(g); }
  // The worker's queued commands (assignments remembered).
  std::vector<v1::WorkerCommand> Drain(const std::string& w) {
    std::vector<v1::WorkerCommand> out;
    EXPECT_TRUE(c.WaitCommands(w, &out, Clock::now() + std::chrono::milliseconds(5)).ok());
    for (const auto& cmd : out) {
      if (cmd.has_assign()) assigned[w] = cmd.assign();
    }
    return out;
  }
  // Global rank g reports step `step` (the head ranks a loss).
  void Step(int g, int step, double loss) {
    const RankLayout layout = jobplan::LayoutOf(Job().spec());
    v1::TelemetryBatch b;
    b.set_worker_id(WorkerOf(g));
    b.set_job_id(job);
    b.set_rank(layout.PipelineRank(g));
    b.set_dp_rank(layout.DataRank(g));
    b.set_session(Job().session());
    auto* t = b.add_actions();
    t->mutable_action()->set_op(v1::F);
    t->set_step(step);
    // Steps of 80 ms, as a small real job's: a coordinated stop's margin is 0.2 s of steps (3).
    t->set_start_ns(int64_t{100'000'000} * step);
    t->set_end_ns(int64_t{100'000'000} * step + 80'000'000);
    auto* s = b.add_steps();
    s->set_step(step);
    if (layout.PipelineRank(g) == 1) {
      s->set_loss(loss);
      s->set_has_loss(true);
    }
    v1::TelemetryAck ack;
    Status st = c.IngestTelemetry(b, &ack);
    EXPECT_TRUE(st.ok()) << "rank " << g << " step " << step << ": " << st.ToString();
  }
  // Global rank g stopped for the recovery, standing at `commit`.
  Status Stopped(int g, const v1::CommitState& commit, std::vector<int> unreachable = {}) {
    const RankLayout layout = jobplan::LayoutOf(Job().spec());
    v1::ReportResultRequest r;
    r.set_worker_id(WorkerOf(g));
    r.set_job_id(job);
    r.set_rank(layout.PipelineRank(g));
    r.set_session(Job().session());
    r.set_ok(false);
    r.set_message("UNAVAILABLE: link to peer broke");
    r.set_awaiting_recovery(true);
    *r.mutable_commit() = commit;
    for (int u : unreachable) r.add_unreachable_peers(u);
    return c.ReportResult(r);
  }
  // The registry's view of worker `w` (ListWorkers).
  v1::WorkerInfo Info(const std::string& w) {
    for (const v1::WorkerInfo& i : c.ListWorkers()) {
      if (i.worker_id() == w) return i;
    }
    ADD_FAILURE() << w << " is not registered";
    return {};
  }
  bool HasEvent(const std::string& part) {
    const v1::Job j = Job();
    for (const auto& e : j.events()) {
      if (e.message().find(part) != std::string::npos) return true;
    }
    return false;
  }
};

v1::CommitState Commit(int committed, int prepared = -1, int in_flight = -1) {
  v1::CommitState c;
  c.set_committed_step(committed);
  c.set_prepared_step(prepared);
  c.set_in_flight_step(in_flight);
  return c;
}

TEST(InPlaceRecoveryTest, ASpareTakesTheLostRankOnceEverySurvivorStopped) {
  Cluster k(5);
  ASSERT_EQ(k.Job().state(), v1::RUNNING);
  std::string spare;
  for (const std::string& w : k.workers) {
    if (k.assigned.count(w) == 0) spare = w;
  }
  ASSERT_FALSE(spare.empty());
  const int lost = 3;  // the head of replica 1
  const std::string lost_worker = k.WorkerOf(lost);
  for (int step = 0; step < 2; ++step) {
    for (int g = 0; g < 4; ++g) k.Step(g, step, 4.0 + g + step);
  }
  for (int g = 0; g < 3; ++g) k.Step(g, 2, 2.0);  // the lost rank never told step 2
  ASSERT_EQ(k.Job().steps_done(), 2);
  // Rank 2 (its pipeline neighbour) saw the link break; it passed step 2's commit and knows the
  // lost rank's loss of it.
  v1::CommitState at2 = Commit(2, -1, 3);
  v1::CommitLosses* l = at2.add_losses();
  l->set_step(2);
  l->add_global_rank(1);
  l->add_loss(2.0);
  l->add_global_rank(3);
  l->add_loss(3.25);
  ASSERT_TRUE(k.Stopped(2, at2, {lost}).ok());
  ASSERT_TRUE(k.c.Deregister(lost_worker).ok());  // the lost worker's end, as a lease loss would be
  EXPECT_TRUE(k.HasEvent("lost rank 1 (dp 1)"));
  EXPECT_TRUE(k.HasEvent("taking it over in place on spare worker " + spare));
  EXPECT_EQ(k.WorkerOf(lost), spare);
  EXPECT_NE(k.Job().recovering(), "");
  // The ranks that had not stopped are halted; the spare waits for where to resume.
  for (int g : {0, 1}) {
    auto cmds = k.Drain(k.WorkerOf(g));
    ASSERT_EQ(cmds.size(), 1u) << "global rank " << g;
    EXPECT_TRUE(cmds[0].has_halt());
  }
  EXPECT_TRUE(k.Drain(k.WorkerOf(2)).empty());
  EXPECT_TRUE(k.Drain(spare).empty());
  // Rank 0 waited in step 2's commit (rank 2 passed it: it applies step 2); rank 1 passed it.
  ASSERT_TRUE(k.Stopped(0, Commit(1, 2, 2)).ok());
  EXPECT_TRUE(k.Drain(spare).empty());
  ASSERT_TRUE(k.Stopped(1, Commit(2, -1, 3)).ok());
  // Step 2 is complete: the lost rank's record from the commit, its loss with it.
  v1::Job j = k.Job();
  ASSERT_EQ(j.steps_done(), 3);
  EXPECT_DOUBLE_EQ(j.steps(2).loss(), (2.0 + 3.25) / 2);
  auto spare_cmds = k.Drain(spare);
  ASSERT_EQ(spare_cmds.size(), 1u);
  ASSERT_TRUE(spare_cmds[0].has_assign());
  const v1::Assignment& a = spare_cmds[0].assign();
  EXPECT_EQ(a.start_step(), 3);
  EXPECT_EQ(a.recovery().resume_step(), 3);
  EXPECT_EQ(a.recovery().state_from(), 1);  // replica 0's rank of the same stage
  EXPECT_EQ(a.dp_rank(), 1);
  EXPECT_EQ(a.rank(), 1);
  EXPECT_EQ(a.session(), j.session());  // the same attempt
  for (int g = 0; g < 3; ++g) {
    auto cmds = k.Drain(k.WorkerOf(g));
    ASSERT_EQ(cmds.size(), 1u);
    ASSERT_TRUE(cmds[0].has_recover()) << "global rank " << g;
    const v1::Recovery& r = cmds[0].recover().recovery();
    EXPECT_EQ(r.resume_step(), 3);
    EXPECT_EQ(r.generation(), a.recovery().generation());
    // The spare's endpoint, to the survivors that exchange data with its rank (and only to them).
    auto endpoint = [&](const auto& peers, int global) -> std::string {
      for (const v1::Peer& p : peers) {
        if (p.global_rank() == global) return p.data_endpoint();
      }
      return "";
    };
    const std::vector<int> links = RankLayout::OfDegrees(2, 2, 1).DataPlanePeers(g);
    const bool linked = std::count(links.begin(), links.end(), lost) > 0;
    EXPECT_FALSE(endpoint(a.peers(), lost).empty());
    EXPECT_EQ(endpoint(r.peers(), lost), linked ? endpoint(a.peers(), lost) : "") << "global rank " << g;
    EXPECT_EQ(r.state_to_size(), g == 1 ? 1 : 0);
  }
  EXPECT_TRUE(k.HasEvent("every rank resumes at step 3"));
  // The first step after it ends the recovery.
  for (int g = 0; g < 4; ++g) k.Step(g, 3, 1.0);
  j = k.Job();
  EXPECT_EQ(j.steps_done(), 4);
  EXPECT_EQ(j.recoveries(), 1);
  EXPECT_EQ(j.restarts(), 0);
  EXPECT_EQ(j.recovering(), "");
  EXPECT_EQ(j.state(), v1::RUNNING);
  EXPECT_TRUE(k.HasEvent("recovered rank 1 (dp 1) on worker " + spare + " from replica 0 in "));
  EXPECT_TRUE(k.HasEvent("; 1 step recomputed, no checkpoint read"));
}

TEST(InPlaceRecoveryTest, WithoutASpareTheJobGoesOnWithOneReplicaFewer) {
  Cluster k(4);
  for (int step = 0; step < 2; ++step) {
    for (int g = 0; g < 4; ++g) k.Step(g, step, 1.0 + step);
  }
  const std::string let_go = k.WorkerOf(2);  // the lost replica's other rank
  const std::string w0 = k.WorkerOf(0), w1 = k.WorkerOf(1);
  ASSERT_TRUE(k.c.Deregister(k.WorkerOf(3)).ok());
  EXPECT_TRUE(k.HasEvent("no spare worker is free; going on with one replica fewer: dp 2 -> 1, 8 micro-batches per replica"));
  for (int g = 0; g < 3; ++g) ASSERT_TRUE(k.Stopped(g, Commit(1, -1, 2)).ok());
  v1::Job j = k.Job();
  EXPECT_EQ(j.spec().dp(), 1);
  EXPECT_EQ(j.spec().microbatches(), 8);
  ASSERT_EQ(j.worker_ids_size(), 2);
  EXPECT_EQ(j.worker_ids(0), w0);
  EXPECT_EQ(j.worker_ids(1), w1);
  EXPECT_EQ(j.steps_done(), 2);
  for (int g = 0; g < 2; ++g) {
    auto cmds = k.Drain(j.worker_ids(g));
    ASSERT_FALSE(cmds.empty());
    ASSERT_TRUE(cmds.back().has_recover());
    const v1::Assignment& a = cmds.back().recover().reshaped();
    EXPECT_EQ(a.rank(), g);
    EXPECT_EQ(a.dp_rank(), 0);
    EXPECT_EQ(a.start_step(), 2);
    EXPECT_EQ(a.spec().dp(), 1);
    EXPECT_EQ(a.peers_size(), 2);
    EXPECT_EQ(a.recovery().resume_step(), 2);
    EXPECT_EQ(a.session(), j.session());
  }
  bool cancelled = false;
  for (const auto& cmd : k.Drain(let_go)) cancelled = cancelled || cmd.cancel_job_id() == k.job;
  EXPECT_TRUE(cancelled);
  // The let-go worker's last words change nothing.
  v1::ReportResultRequest late;
  late.set_worker_id(let_go);
  late.set_job_id(k.job);
  late.set_rank(0);
  late.set_session(j.session());
  late.set_message("stopped: cancelled by the coordinator");
  EXPECT_TRUE(k.c.ReportResult(late).ok());
  EXPECT_EQ(k.Job().state(), v1::RUNNING);
  for (int g = 0; g < 2; ++g) k.Step(g, 2, 0.5);
  j = k.Job();
  EXPECT_EQ(j.steps_done(), 3);
  EXPECT_EQ(j.recoveries(), 1);
  EXPECT_EQ(j.restarts(), 0);
  EXPECT_TRUE(k.HasEvent("recovered from the loss of rank 1 (dp 1) by going on with dp 1 in "));

  // Growing back: the let-go worker released its part, and one more worker registers.
  v1::ReleaseJobRequest release;
  release.set_worker_id(let_go);
  release.set_job_id(k.job);
  release.set_session(j.session());
  ASSERT_TRUE(k.c.ReleaseJob(release).ok());
  EXPECT_EQ(k.Job().spec().dp(), 1);  // one free worker is not a replica
  const std::string back = k.c.Register(WorkerAt(7100))->worker_id();
  // The stop step: one past the furthest step open (3), plus 0.2 s of 80 ms steps (3).
  ASSERT_NEAR(k.Job().steps(k.Job().steps_size() - 1).step_time_s(), 0.08, 1e-9);
  const int stop = 3 + 1 + 3;
  EXPECT_TRUE(k.HasEvent("free: growing back to dp 2, 4 micro-batches per replica (the same global batch); every rank "
                         "stops after step " + std::to_string(stop)));
  for (int g = 0; g < 2; ++g) {
    auto cmds = k.Drain(k.WorkerOf(g));
    ASSERT_EQ(cmds.size(), 1u);
    ASSERT_TRUE(cmds[0].has_halt());
    EXPECT_TRUE(cmds[0].halt().at_step_end());
    EXPECT_EQ(cmds[0].halt().step(), stop);
  }
  for (int step = 3; step <= stop; ++step) {
    k.Step(0, step, 0.5);
    k.Step(1, step, 0.5);
  }
  ASSERT_TRUE(k.Stopped(0, Commit(stop)).ok());
  ASSERT_TRUE(k.Stopped(1, Commit(stop)).ok());
  j = k.Job();
  EXPECT_EQ(j.spec().dp(), 2);
  EXPECT_EQ(j.spec().microbatches(), 4);
  ASSERT_EQ(j.worker_ids_size(), 4);
  EXPECT_EQ(j.worker_ids(0), w0);  // the running replica keeps its ranks
  EXPECT_EQ(j.worker_ids(1), w1);
  for (int g = 0; g < 2; ++g) {
    auto cmds = k.Drain(j.worker_ids(g));
    ASSERT_EQ(cmds.size(), 1u);
    ASSERT_TRUE(cmds[0].has_recover());
    EXPECT_EQ(cmds[0].recover().reshaped().spec().dp(), 2);
    EXPECT_EQ(cmds[0].recover().reshaped().start_step(), stop + 1);
    ASSERT_EQ(cmds[0].recover().reshaped().recovery().state_to_size(), 1);
    EXPECT_EQ(cmds[0].recover().reshaped().recovery().state_to(0), 2 + g);  // its stage's new rank
  }
  for (int g = 2; g < 4; ++g) {
    auto cmds = k.Drain(j.worker_ids(g));
    ASSERT_EQ(cmds.size(), 1u);
    ASSERT_TRUE(cmds[0].has_assign());
    EXPECT_EQ(cmds[0].assign().dp_rank(), 1);
    EXPECT_EQ(cmds[0].assign().recovery().state_from(), g - 2);
    EXPECT_EQ(cmds[0].assign().start_step(), stop + 1);
  }
  EXPECT_TRUE(j.worker_ids(2) == back || j.worker_ids(3) == back);
  for (int g = 0; g < 4; ++g) k.Step(g, stop + 1, 0.25);
  j = k.Job();
  EXPECT_EQ(j.steps_done(), stop + 2);
  EXPECT_EQ(j.recoveries(), 1);
  EXPECT_EQ(j.recovering(), "");
  EXPECT_TRUE(k.HasEvent("grew back to dp 2 in "));
}

// A job that shrank to dp 1 in place and then restarted runs its next attempt at dp 1, whose
// ranks run no step commit (jobplan::RunsStepCommit): free workers do not make it halt for a
// growth in place its ranks cannot stop for (the soak test's seed 26 failed such a job when its
// rank reported the stop as a failure). It stays at dp 1 and runs on.
TEST(InPlaceRecoveryTest, AnAttemptWithoutStepCommitsDoesNotGrowInPlace) {
  Cluster k(4, /*dp=*/2, CoordinatorOptions{}, /*max_restarts=*/1);
  for (int g = 0; g < 4; ++g) k.Step(g, 0, 1.0);
  const std::string let_go = k.WorkerOf(2);
  ASSERT_TRUE(k.c.Deregister(k.WorkerOf(3)).ok());
  for (int g = 0; g < 3; ++g) ASSERT_TRUE(k.Stopped(g, Commit(0, -1, 1)).ok());
  ASSERT_EQ(k.Job().spec().dp(), 1);
  const uint64_t shrunk_session = k.Job().session();
  for (int g = 0; g < 2; ++g) k.Step(g, 1, 0.5);
  // Rank 1 is lost too: the job restarts (from step 0) at its current size, dp 1.
  const std::string lost = k.WorkerOf(1), kept = k.WorkerOf(0);
  ASSERT_TRUE(k.c.Deregister(lost).ok());
  for (const std::string& w : {kept, let_go}) {
    v1::ReleaseJobRequest release;
    release.set_worker_id(w);
    release.set_job_id(k.job);
    release.set_session(shrunk_session);
    ASSERT_TRUE(k.c.ReleaseJob(release).ok());
  }
  v1::Job j = k.Job();
  ASSERT_EQ(j.state(), v1::RUNNING) << j.DebugString();
  ASSERT_NE(j.session(), shrunk_session);
  ASSERT_EQ(j.spec().dp(), 1);
  ASSERT_EQ(j.restarts(), 1);
  for (const std::string& w : j.worker_ids()) k.Drain(w);
  // Two workers free, a replica's worth: no growth.
  k.c.Register(WorkerAt(7200));
  k.c.Register(WorkerAt(7201));
  int free = 0;
  for (const v1::WorkerInfo& w : k.c.ListWorkers()) free += w.job_id().empty();
  ASSERT_EQ(free, 2);
  for (int step = 0; step < 4; ++step) {
    for (int g = 0; g < 2; ++g) k.Step(g, step, 0.5);
  }
  j = k.Job();
  EXPECT_EQ(j.spec().dp(), 1);
  EXPECT_EQ(j.recovering(), "");
  EXPECT_FALSE(k.HasEvent("growing back"));
  for (const std::string& w : j.worker_ids()) {
    for (const auto& cmd : k.Drain(w)) EXPECT_FALSE(cmd.has_halt()) << w;
  }
}

TEST(InPlaceRecoveryTest, WithoutASpareOrAnEvenSplitTheRestartPolicyApplies) {
  Cluster k(8, /*dp=*/4);
  for (int g = 0; g < 8; ++g) k.Step(g, 0, 1.0);
  ASSERT_TRUE(k.c.Deregister(k.WorkerOf(7)).ok());
  EXPECT_TRUE(k.HasEvent("not recovering rank 1 (dp 3) in place: no spare worker is free, and the 16 micro-batches of a "
                         "step do not divide over 3 replica(s); the restart policy applies"));
  EXPECT_EQ(k.Job().state(), v1::FAILED);  // spec.maxRestarts 0
  EXPECT_EQ(k.Job().recoveries(), 0);
}

TEST(InPlaceRecoveryTest, OneReplicaHoldsNoCopyOfTheLostState) {
  Cluster k(3, /*dp=*/1);
  for (int g = 0; g < 2; ++g) k.Step(g, 0, 1.0);
  ASSERT_TRUE(k.c.Deregister(k.WorkerOf(1)).ok());
  EXPECT_TRUE(k.HasEvent("not recovering rank 1 (dp 0) in place: dp 1: no data-parallel replica holds the lost rank's state"));
  EXPECT_EQ(k.Job().state(), v1::FAILED);
}

TEST(InPlaceRecoveryTest, SurvivorsTwoCommitsApartFailTheAttempt) {
  Cluster k(5);
  for (int g = 0; g < 4; ++g) k.Step(g, 0, 1.0);
  ASSERT_TRUE(k.c.Deregister(k.WorkerOf(3)).ok());
  ASSERT_TRUE(k.Stopped(0, Commit(4)).ok());
  ASSERT_TRUE(k.Stopped(1, Commit(4)).ok());
  ASSERT_TRUE(k.Stopped(2, Commit(2)).ok());  // impossible with the commit: not resumed
  EXPECT_EQ(k.Job().state(), v1::FAILED);
  EXPECT_NE(k.Job().failure_cause().find("in-place recovery of rank 1 (dp 1): rank 0 (dp 1) committed step 2"),
            std::string::npos)
      << k.Job().failure_cause();
  // The spare was held for the lost rank and never told (its assignment waits for every survivor
  // to stop): it is free again, not left waiting for a release that would never come.
  const v1::WorkerInfo spare = k.Info(k.WorkerOf(3));
  EXPECT_EQ(spare.job_id(), "");
  EXPECT_FALSE(spare.closing());
}

// A survivor that never stops (it finished its last step, or hangs) fails the attempt at the
// recovery's deadline; the restart runs on the spare that was held for the recovery, so a job that
// needs every worker left does not wait for ever (the soak test's hang of 2026-11-30).
TEST(InPlaceRecoveryTest, ARecoveryPastItsDeadlineFreesTheSpareForTheRestart) {
  CoordinatorOptions options;
  options.lease = std::chrono::milliseconds(40);
  options.recovery_grace = std::chrono::milliseconds(80);
  Cluster k(5, /*dp=*/2, std::move(options), /*max_restarts=*/1);
  for (int g = 0; g < 4; ++g) k.Step(g, 0, 1.0);
  const std::string lost_worker = k.WorkerOf(3);
  ASSERT_TRUE(k.c.Deregister(lost_worker).ok());
  const std::string spare = k.WorkerOf(3);
  ASSERT_NE(spare, lost_worker);
  ASSERT_TRUE(k.HasEvent("taking it over in place on spare worker " + spare));
  ASSERT_TRUE(k.Stopped(0, Commit(0)).ok());
  ASSERT_TRUE(k.Stopped(1, Commit(0)).ok());  // rank 2 never stops
  // Past the deadline (2 leases, 80 ms), every live worker heartbeating meanwhile.
  const auto end = Clock::now() + std::chrono::milliseconds(200);
  while (Clock::now() < end) {
    for (const std::string& w : k.workers) {
      if (w == lost_worker) continue;
      v1::HeartbeatRequest beat;
      beat.set_worker_id(w);
      ASSERT_TRUE(k.c.Heartbeat(beat).ok()) << w;
    }
    k.c.Tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(k.HasEvent("restarting (1 of 1) from step 0")) << k.Job().DebugString();
  EXPECT_TRUE(k.HasEvent("rank 0 (dp 1) did not stop within 80 ms"));
  // The old attempt's three ranks close their part; the spare was never told, so it is free now.
  const v1::Job before = k.Job();
  EXPECT_EQ(k.Info(spare).job_id(), "");
  for (const std::string& w : k.workers) {
    if (w == lost_worker || w == spare) continue;
    v1::ReleaseJobRequest release;
    release.set_worker_id(w);
    release.set_job_id(k.job);
    release.set_session(k.assigned[w].session());
    ASSERT_TRUE(k.c.ReleaseJob(release).ok());
  }
  // The four workers left (the spare among them) run the restart.
  const v1::Job after = k.Job();
  ASSERT_EQ(after.state(), v1::RUNNING) << after.DebugString();
  EXPECT_NE(after.session(), before.session());
  EXPECT_NE(std::find(after.worker_ids().begin(), after.worker_ids().end(), spare), after.worker_ids().end());
}

}  // namespace
}  // namespace pipecoord::coordinator
