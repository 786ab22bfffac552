// An ingest round lets go of the core lock while it writes to the state store and while it runs
// its batches' checks (issue "one coordinator for 16,384 ranks": a state write to etcd waiting for
// a new raft leader held every call for seconds). Each test holds the round inside the real
// SQLite store's write, or inside the real Prometheus exporter the checks feed (a batch's, a
// measured step's, the step-level ones), and calls the coordinator meanwhile: the calls answer;
// the round, let go, counts its batch and records its step as before.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "coordinator/coordinator.h"
#include "coordinator/http/prometheus_metrics.h"
#include "coordinator/state_file_for_tests.h"
#include "coordinator/state_store.h"
#include "jobplan/tiny_spec_for_tests.h"

namespace pipecoord::coordinator {
namespace {

constexpr auto kPrompt = std::chrono::seconds(5);  // a call that waits this long waited for the round

// Holds the first thread that passes it once armed, until opened.
class Gate {
 public:
  void Arm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
  }
  void Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!armed_ || open_) return;
    entered_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
  }
  bool WaitEntered() {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, kPrompt, [&] { return entered_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool armed_ = false, entered_ = false, open_ = false;
};

// The SQLite state store, its telemetry writes held at the gate.
class HeldStore final : public StateStore {
 public:
  HeldStore(std::unique_ptr<StateStore> real, Gate* gate) : real_(std::move(real)), gate_(gate) {}
  Status PutJob(const v1::Job& job) override { return real_->PutJob(job); }
  Status AppendEvent(const std::string& id, const std::string& bytes) override { return real_->AppendEvent(id, bytes); }
  Status AppendEvents(const std::vector<std::pair<std::string, std::string>>& events) override {
    return real_->AppendEvents(events);
  }
  Status AppendStep(const std::string& id, const v1::StepRecord& step) override { return real_->AppendStep(id, step); }
  Result<int64_t> AppendTelemetry(const std::string& id, const v1::TelemetryBatch& batch) override {
    gate_->Pass();
    return real_->AppendTelemetry(id, batch);
  }
  Status AppendTelemetryRows(const std::vector<TelemetryRow>& rows, std::vector<int64_t>* seqs) override {
    gate_->Pass();
    return real_->AppendTelemetryRows(rows, seqs);
  }
  Status DropTelemetryBefore(const std::string& id, int64_t seq) override { return real_->DropTelemetryBefore(id, seq); }
  Status PutCheckpointedSteps(const std::string& id, int n) override { return real_->PutCheckpointedSteps(id, n); }
  Status PutWorker(const std::string& id) override { return real_->PutWorker(id); }
  Status PutCounters(uint64_t job, uint64_t worker, uint64_t session, uint64_t epoch) override {
    return real_->PutCounters(job, worker, session, epoch);
  }
  Status DeleteJob(const std::string& id) override { return real_->DeleteJob(id); }
  Result<StoredState> Load(std::vector<std::vector<std::string>>* events) override { return real_->Load(events); }
  std::string where() const override { return real_->where(); }

 private:
  std::unique_ptr<StateStore> real_;
  Gate* gate_;
};

// The Prometheus exporter, its action histograms (fed by a batch's checks) held at the gate.
class HeldMetrics final : public health::MetricsSink {
 public:
  explicit HeldMetrics(Gate* gate) : gate_(gate) {}  // the per-batch checks held at `gate`
  http::PrometheusMetrics real;
  void Action(const std::string& job, const health::RankLabel& at, int stage, const std::string& op, double s) override {
    gate_->Pass();
    real.Action(job, at, stage, op, s);
  }
  void Step(const std::string& job, double s, double measured, double predicted) override {
    real.Step(job, s, measured, predicted);
  }
  void Idle(const std::string& job, const health::RankLabel& at, double a, double b, double c, double d) override {
    real.Idle(job, at, a, b, c, d);
  }
  void Predicted(const std::string& job, double a, double b, double c, double d) override {
    if (measure_gate != nullptr) measure_gate->Pass();
    real.Predicted(job, a, b, c, d);
  }
  Gate* measure_gate = nullptr;  // a measured step's checks (the calibration, the idle split) held here
  void Straggler(const std::string& job, const health::RankLabel& at, const std::string& op, double a, double b) override {
    if (straggler_gate != nullptr) straggler_gate->Pass();
    real.Straggler(job, at, op, a, b);
  }
  Gate* straggler_gate = nullptr;  // the step-level (straggler) check's scores held here
  void Memory(const std::string& job, const health::RankLabel& at, uint64_t a, uint64_t b, uint64_t c) override {
    real.Memory(job, at, a, b, c);
  }
  void Event(const std::string& job, const std::string& kind) override { real.Event(job, kind); }
  void ForgetJob(const std::string& job) override { real.ForgetJob(job); }

 private:
  Gate* gate_;
};

// A tiny pp 2 job running on two registered workers.
struct Running {
  explicit Running(CoordinatorOptions o, v1::JobSpec spec = jobplan::TinySpec()) : c(std::move(o)) {
    job = c.SubmitJob(spec)->job_id();
    for (int port : {1, 2}) {
      v1::RegisterRequest r;
      r.set_device_kind("cpu");
      r.set_host("localhost");
      r.set_data_endpoint("127.0.0.1:" + std::to_string(port));
      workers.push_back(c.Register(r)->worker_id());
    }
  }
  v1::TelemetryBatch Batch(int rank, int step = 0) const {
    v1::TelemetryBatch b;
    b.set_worker_id(workers[rank]);
    b.set_job_id(job);
    b.set_rank(rank);
    auto* t = b.add_actions();
    t->mutable_action()->set_op(v1::F);
    t->set_step(step);
    t->set_start_ns(1000);
    t->set_end_ns(2000 + rank * 500);
    auto* s = b.add_steps();
    s->set_step(step);
    s->set_loss(3.5);
    s->set_has_loss(rank == 1);
    s->set_memory_peak_bytes(100);
    return b;
  }
  Coordinator c;
  std::string job;
  std::vector<std::string> workers;
};

// Runs rank `rank`'s step-0 batch as a round on a thread of its own; join() gives its status.
struct RoundThread {
  RoundThread(Running& r, int rank) : batch(r.Batch(rank)) {
    round.resize(1);
    round[0].batch = &batch;
    round[0].ack = &ack;
    thread = std::thread([&c = r.c, this] { c.IngestTelemetryRound(&round); });
  }
  Status Join() {
    if (thread.joinable()) thread.join();
    return round[0].status;
  }
  v1::TelemetryBatch batch;
  v1::TelemetryAck ack;
  std::vector<Coordinator::TelemetryIn> round;
  std::thread thread;
};

// Opens the gate and joins the round at the end of a test, whatever failed before.
struct OpenAtEnd {
  Gate& gate;
  RoundThread& round;
  ~OpenAtEnd() {
    gate.Open();
    round.Join();
  }
};

// True when `call` answers within kPrompt (it did not wait for the held round). A call that
// waits is left in `waiting` (joined once the test has opened the gate: declared before it).
template <typename F>
bool Prompt(std::vector<std::future<void>>& waiting, F call) {
  waiting.push_back(std::async(std::launch::async, [call] { (void)call(); }));
  return waiting.back().wait_for(kPrompt) == std::future_status::ready;
}

TEST(IngestOutsideLockTest, CallsAnswerWhileARoundsTelemetryIsBeingStored) {
  Gate gate;
  auto real = StateStore::Open(FreshStatePath("held-store"));
  ASSERT_TRUE(real.ok()) << real.status().ToString();
  HeldStore store(std::move(real).value(), &gate);
  CoordinatorOptions o;
  o.store = &store;
  Running r(o);
  ASSERT_EQ(r.c.GetJob(r.job)->state(), v1::RUNNING);
  std::vector<std::future<void>> waiting;
  gate.Arm();
  RoundThread held(r, 0);
  OpenAtEnd open_at_end{gate, held};  // a failed expectation must not leave the round held
  ASSERT_TRUE(gate.WaitEntered()) << "the round never reached the store";
  EXPECT_TRUE(Prompt(waiting, [&] { return r.c.GetJob(r.job).ok(); })) << "GetJob waited for the store write";
  EXPECT_TRUE(Prompt(waiting, [&] { return r.c.ListJobs().size(); })) << "ListJobs waited for the store write";
  EXPECT_TRUE(Prompt(waiting, [&] { return r.c.JobHealth(r.job).ok(); })) << "JobHealth waited for the store write";
  // A second round waits for this one (each rank's next batch depends on it): the inline path
  // declines at once.
  const v1::TelemetryBatch other = r.Batch(1);
  v1::TelemetryAck other_ack;
  Status other_status;
  bool inline_taken = true;
  EXPECT_TRUE(Prompt(waiting, [&] { return inline_taken = r.c.TryIngestTelemetry(other, &other_ack, &other_status); }));
  EXPECT_FALSE(inline_taken);
  EXPECT_EQ(r.c.GetJob(r.job)->steps_size(), 0);
  gate.Open();
  ASSERT_TRUE(held.Join().ok()) << held.round[0].status.ToString();
  EXPECT_EQ(held.ack.actions_accepted(), 1);
  // Counted as ever: rank 1's batch completes step 0, measured from both.
  ASSERT_TRUE(r.c.IngestTelemetry(other, &other_ack).ok());
  const v1::Job job = *r.c.GetJob(r.job);
  ASSERT_EQ(job.steps_size(), 1);
  EXPECT_EQ(job.steps(0).loss(), 3.5);
  EXPECT_DOUBLE_EQ(job.steps(0).step_time_s(), 1500e-9);
}

TEST(IngestOutsideLockTest, CallsAnswerWhileARoundsChecksRun) {
  Gate gate;
  HeldMetrics metrics(&gate);
  CoordinatorOptions o;
  o.metrics = &metrics;
  Running r(o);
  std::vector<std::future<void>> waiting;
  gate.Arm();
  RoundThread held(r, 0);
  OpenAtEnd open_at_end{gate, held};
  ASSERT_TRUE(gate.WaitEntered()) << "the round's checks never fed the exporter";
  EXPECT_TRUE(Prompt(waiting, [&] { return r.c.GetJob(r.job).ok(); })) << "GetJob waited for the checks";
  EXPECT_TRUE(Prompt(waiting, [&] { return r.c.ListJobs().size(); })) << "ListJobs waited for the checks";
  EXPECT_TRUE(Prompt(waiting, [&] {
    r.c.Tick();
    return true;
  })) << "the coordinator's tick waited for the checks";
  gate.Open();
  ASSERT_TRUE(held.Join().ok()) << held.round[0].status.ToString();
  // The check's measurement reached the exporter: rank 0's F of 1 us in the action histogram.
  const std::string page = metrics.real.Serialize();
  const std::string series = "pipecoord_action_duration_seconds_count{dp=\"0\",job_id=\"" + r.job + "\",op=\"F\",rank=\"0\",stage=\"0\"} 1";
  EXPECT_NE(page.find(series), std::string::npos) << page.substr(0, 4000);
}


// The step-level checks (the straggler check scoring every rank once a step is measured) run
// outside the core lock too: held inside them, the coordinator answers and ticks.
TEST(IngestOutsideLockTest, CallsAnswerWhileAStepsChecksRun) {
  Gate unused, gate;
  HeldMetrics metrics(&unused);
  metrics.straggler_gate = &gate;
  CoordinatorOptions o;
  o.metrics = &metrics;
  Running r(o);
  std::vector<std::future<void>> waiting;
  gate.Arm();
  // Steps on a thread of their own until the check scores one (after its warm-up).
  std::atomic<bool> stop{false};
  Status failed;
  std::thread steps([&] {
    for (int step = 0; step < 40 && !stop; ++step) {
      for (int rank = 0; rank < 2; ++rank) {
        v1::TelemetryAck ack;
        if (Status st = r.c.IngestTelemetry(r.Batch(rank, step), &ack); !st.ok()) {
          failed = st;
          return;
        }
      }
    }
  });
  struct OpenAtEnd {
    Gate& g;
    std::atomic<bool>& stop;
    std::thread& t;
    ~OpenAtEnd() {
      stop = true;
      g.Open();
      if (t.joinable()) t.join();
    }
  } open_at_end{gate, stop, steps};
  ASSERT_TRUE(gate.WaitEntered()) << "no step was scored by the straggler check: " << failed.ToString();
  EXPECT_TRUE(Prompt(waiting, [&] { return r.c.GetJob(r.job).ok(); })) << "GetJob waited for the step's checks";
  EXPECT_TRUE(Prompt(waiting, [&] {
    r.c.Tick();
    return true;
  })) << "the coordinator's tick waited for the step's checks";
  stop = true;
  gate.Open();
  steps.join();
  EXPECT_TRUE(failed.ok()) << failed.ToString();
  EXPECT_GT(r.c.GetJob(r.job)->steps_size(), 0);
}

// A measured step's checks (JobMonitor::OnStepMeasured: the calibration, each rank's idle split
// and the bubble check) run outside the core lock too; the step is recorded when they come back.
TEST(IngestOutsideLockTest, CallsAnswerWhileAMeasuredStepIsChecked) {
  Gate unused, gate;
  HeldMetrics metrics(&unused);
  metrics.measure_gate = &gate;
  CoordinatorOptions o;
  o.metrics = &metrics;
  Running r(o);
  std::vector<std::future<void>> waiting;
  v1::TelemetryAck ack;
  ASSERT_TRUE(r.c.IngestTelemetry(r.Batch(0), &ack).ok());
  gate.Arm();
  RoundThread held(r, 1);  // completes step 0
  OpenAtEnd open_at_end{gate, held};
  ASSERT_TRUE(gate.WaitEntered()) << "step 0 was never measured";
  EXPECT_TRUE(Prompt(waiting, [&] { return r.c.GetJob(r.job).ok(); })) << "GetJob waited for the step's measurement";
  EXPECT_TRUE(Prompt(waiting, [&] { return r.c.ListJobs().size(); })) << "ListJobs waited for the step's measurement";
  EXPECT_TRUE(Prompt(waiting, [&] {
    r.c.Tick();
    return true;
  })) << "the coordinator's tick waited for the step's measurement";
  EXPECT_EQ(r.c.GetJob(r.job)->steps_size(), 0) << "recorded before its checks came back";
  gate.Open();
  ASSERT_TRUE(held.Join().ok()) << held.round[0].status.ToString();
  const v1::Job job = *r.c.GetJob(r.job);
  ASSERT_EQ(job.steps_size(), 1);
  EXPECT_EQ(job.steps(0).loss(), 3.5);
  EXPECT_EQ(job.steps_done(), 1);
  EXPECT_GT(job.steps(0).predicted_bubble_rate(), 0) << "the measurement's predictions are not in the record";
  EXPECT_DOUBLE_EQ(job.steps(0).predicted_bubble_rate(), job.plan().predicted_bubble_rate());
}

// A restart while a step's checks are out: the new attempt starts over from step 0 (no rank had a
// checkpoint), so the step, measured by the attempt that failed, is not recorded when they come
// back; and the new attempt's monitor is not fed the old one's calibration or events.
TEST(IngestOutsideLockTest, AStepARestartDroppedWhileItWasCheckedIsNotRecorded) {
  Gate unused, gate;
  HeldMetrics metrics(&unused);
  metrics.measure_gate = &gate;
  CoordinatorOptions o;
  o.metrics = &metrics;
  v1::JobSpec spec = jobplan::TinySpec();
  spec.set_max_restarts(2);
  Running r(o, spec);
  std::vector<std::future<void>> waiting;
  v1::TelemetryAck ack;
  ASSERT_TRUE(r.c.IngestTelemetry(r.Batch(0), &ack).ok());
  gate.Arm();
  RoundThread held(r, 1);
  OpenAtEnd open_at_end{gate, held};
  ASSERT_TRUE(gate.WaitEntered()) << "step 0 was never measured";
  v1::ReportResultRequest bad;
  bad.set_worker_id(r.workers[0]);
  bad.set_job_id(r.job);
  bad.set_rank(0);
  bad.set_ok(false);
  bad.set_message("CUDA error: an illegal memory access");
  EXPECT_TRUE(Prompt(waiting, [&] { return r.c.ReportResult(bad).ok(); })) << "ReportResult waited for the step's measurement";
  const v1::Job restarted = *r.c.GetJob(r.job);
  EXPECT_EQ(restarted.restarts(), 1);
  gate.Open();
  ASSERT_TRUE(held.Join().ok()) << held.round[0].status.ToString();
  const v1::Job job = *r.c.GetJob(r.job);
  EXPECT_EQ(job.restarts(), 1);
  EXPECT_EQ(job.steps_size(), 0) << "the failed attempt's step 0 was recorded into the next attempt";
  EXPECT_EQ(job.steps_done(), 0);
}

}  // namespace
}  // namespace pipecoord::coordinator
