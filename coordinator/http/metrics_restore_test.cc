// /metrics across a coordinator restart: a new coordinator on the same state file exports every
// kept job's series with the values the old one had (histograms, counters and gauges alike),
// and a resumed job's counters continue from there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "coordinator/coordinator.h"
#include "coordinator/http/prometheus_metrics.h"
#include "coordinator/state_file_for_tests.h"
#include "coordinator/state_store.h"
#include "jobplan/probe_placement.h"
#include "kernels/cpu/known_answer_gemm.h"

namespace pipecoord::coordinator {
namespace {

v1::JobSpec Spec(int steps) {
  v1::JobSpec s;
  s.set_name("metrics");
  s.set_schedule("1f1b");
  s.set_pp(2);
  s.set_microbatches(2);
  s.set_micro_batch_size(1);
  s.set_steps(steps);
  auto* m = s.mutable_model();
  m->set_layers(2);
  m->set_hidden(8);
  m->set_heads(2);
  m->set_vocab(16);
  m->set_seq_len(4);
  m->set_seed(5);
  return s;
}

// A coordinator over the state file at `path` feeding `metrics`, restored from the file.
OnFile WithMetrics(const std::string& path, health::MetricsSink* metrics) {
  CoordinatorOptions o = ShortAdoption();
  o.metrics = metrics;
  return OnFile(path, o);
}

std::string RegisterCpu(Coordinator& c, const std::string& id = "") {
  v1::RegisterRequest r;
  r.set_device_kind("cpu");
  r.set_data_endpoint("127.0.0.1:1");
  r.set_worker_id(id);
  auto got = c.Register(r);
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  return got.ok() ? got->worker_id() : "";
}

// The assignment waiting for each worker, by pipeline rank.
std::map<int, std::pair<std::string, v1::Assignment>> Assignments(Coordinator& c, const std::vector<std::string>& workers) {
  std::map<int, std::pair<std::string, v1::Assignment>> out;
  for (const std::string& w : workers) {
    std::vector<v1::WorkerCommand> cmds;
    EXPECT_TRUE(c.WaitCommands(w, &cmds, std::chrono::steady_clock::now()).ok());
    for (const v1::WorkerCommand& cmd : cmds) {
      if (cmd.has_assign()) out[cmd.assign().rank()] = {w, cmd.assign()};
    }
  }
  return out;
}

struct Faults {
  int memory_step = -1;  // rank 1 reports a peak over its budget at this step
  int sdc_step = -1;     // rank 0's probe is wrong at this step
};

// One whole step of `a`'s rank as one batch: every action of its job list with made-up but
// deterministic timings (rank 1 a little slower, so the straggler scores are not all 1), then
// the summary, checkpointed.
v1::TelemetryBatch StepBatch(const std::string& worker, const v1::Assignment& a, int step, const Faults& f = {}) {
  v1::TelemetryBatch b;
  b.set_worker_id(worker);
  b.set_job_id(a.job_id());
  b.set_rank(a.rank());
  b.set_dp_rank(a.dp_rank());
  b.set_session(a.session());
  int64_t t = 1'000'000'000LL + step * 10'000'000LL;
  for (int k = 0; k < a.jobs().actions_size(); ++k) {
    const v1::Action& act = a.jobs().actions(k);
    v1::ActionTiming* timing = b.add_actions();
    *timing->mutable_action() = act;
    timing->set_step(step);
    const int64_t dur = 20'000 + 1'000 * k + 7'000 * a.rank() + 3'000 * (step % 4);
    timing->set_start_ns(t);
    timing->set_end_ns(t + dur);
    t += dur + 500;
    if (act.op() == v1::PROBE) {
      // What a healthy worker reports: its stage's GEMM (jobplan::ProbeGemmFor).
      bool head = false;
      for (const v1::StageShard& sh : a.shards()) head = head || sh.has_head();
      const jobplan::ProbeGemm g = jobplan::ProbeGemmFor(a.spec(), head);
      const uint64_t good =
          kernels::cpu::KnownAnswerChecksum(kernels::cpu::ProbeSeed(a.spec().model().seed(), step), {g.m, g.k, g.n});
      timing->set_probe_checksum(a.rank() == 0 && step == f.sdc_step ? good ^ 1 : good);
    }
  }
  v1::StepSummary* s = b.add_steps();
  s->set_step(step);
  if (a.rank() == a.spec().pp() - 1) {
    s->set_loss(4.0 - 0.01 * step);
    s->set_has_loss(true);
  }
  s->set_memory_peak_bytes(a.rank() == 1 && step == f.memory_step ? 1u << 30 : 10'000 + 1'000 * a.rank() + step);
  s->add_checkpointed_steps(step);
  return b;
}

void Feed(Coordinator& c, const std::map<int, std::pair<std::string, v1::Assignment>>& ranks, int from, int to,
          const Faults& f = {}) {
  for (int step = from; step < to; ++step) {
    for (const auto& [rank, wa] : ranks) {
      v1::TelemetryAck ack;
      Status st = c.IngestTelemetry(StepBatch(wa.first, wa.second, step, f), &ack);
      ASSERT_TRUE(st.ok()) << "rank " << rank << " step " << step << ": " << st.ToString();
    }
  }
}

void Report(Coordinator& c, const std::map<int, std::pair<std::string, v1::Assignment>>& ranks, bool ok) {
  for (const auto& [rank, wa] : ranks) {
    v1::ReportResultRequest r;
    r.set_worker_id(wa.first);
    r.set_job_id(wa.second.job_id());
    r.set_rank(rank);
    r.set_ok(ok);
    r.set_session(wa.second.session());
    if (!ok) r.set_message("killed");
    ASSERT_TRUE(c.ReportResult(r).ok());
    if (!ok) break;  // one failure restarts the job
  }
  // Each worker closed the job's links: free for the next job (or the restart).
  for (const auto& [rank, wa] : ranks) {
    v1::ReleaseJobRequest r;
    r.set_worker_id(wa.first);
    r.set_job_id(wa.second.job_id());
    r.set_session(wa.second.session());
    ASSERT_TRUE(c.ReleaseJob(r).ok());
  }
}

// The exposition's samples of job `job`: "name{labels}" -> value text (labels sorted by name).
std::map<std::string, std::string> Series(const std::string& exposition, const std::string& job) {
  std::map<std::string, std::string> out;
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.find("job_id=\"" + job + "\"") == std::string::npos) continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = line.substr(space + 1);
  }
  return out;
}

std::string Value(const std::map<std::string, std::string>& series, const std::string& key) {
  auto it = series.find(key);
  return it == series.end() ? "(absent)" : it->second;
}

// A finished job's series leave /metrics once metrics_retention has passed since it ended (its
// history stays: GetJob still has every step); a running job's series stay.
TEST(MetricsRestoreTest, AFinishedJobsSeriesLeaveMetricsAfterTheRetention) {
  int64_t now_ns = 1'700'000'000'000'000'000;
  http::PrometheusMetrics metrics;
  CoordinatorOptions o;
  o.metrics = &metrics;
  o.now_ns = [&] { return now_ns; };
  o.metrics_retention = std::chrono::seconds(60);
  Coordinator c(o);
  const std::vector<std::string> workers = {RegisterCpu(c), RegisterCpu(c), RegisterCpu(c), RegisterCpu(c)};
  const std::string done = c.SubmitJob(Spec(3))->job_id();
  const std::string running = c.SubmitJob(Spec(100))->job_id();
  std::map<std::string, std::map<int, std::pair<std::string, v1::Assignment>>> by_job;
  for (const std::string& w : workers) {
    std::vector<v1::WorkerCommand> cmds;
    ASSERT_TRUE(c.WaitCommands(w, &cmds, std::chrono::steady_clock::now()).ok());
    for (const v1::WorkerCommand& cmd : cmds) by_job[cmd.assign().job_id()][cmd.assign().rank()] = {w, cmd.assign()};
  }
  ASSERT_EQ(by_job[done].size(), 2u);
  ASSERT_EQ(by_job[running].size(), 2u);
  Feed(c, by_job[done], 0, 3);
  Feed(c, by_job[running], 0, 5);
  Report(c, by_job[done], true);
  ASSERT_EQ(c.GetJob(done)->state(), v1::SUCCEEDED);
  const std::string steps_done = "pipecoord_steps_total{job_id=\"" + done + "\"}";
  now_ns += 59'000'000'000;  // within the retention
  c.Tick();
  EXPECT_EQ(Value(Series(metrics.Serialize(), done), steps_done), "3");
  now_ns += 2'000'000'000;  // past it
  c.Tick();
  const std::string page = metrics.Serialize();
  EXPECT_TRUE(Series(page, done).empty()) << "still on /metrics: " << Series(page, done).begin()->first;
  EXPECT_EQ(Value(Series(page, running), "pipecoord_steps_total{job_id=\"" + running + "\"}"), "5");
  EXPECT_EQ(c.GetJob(done)->steps_size(), 3);  // its history stays
}

TEST(MetricsRestoreTest, KeptJobsSeriesComeBackAndAResumedJobsCountersContinue) {
  const std::string path = FreshStatePath("metrics-restore");
  std::string done, resumed;
  std::vector<std::string> workers;
  std::string before;
  {
    http::PrometheusMetrics metrics;
    OnFile first = WithMetrics(path, &metrics);
    ASSERT_TRUE(first.restored.ok());
    Coordinator& c = *first.c;
    workers = {RegisterCpu(c), RegisterCpu(c)};
    // A job run to the end, with a MEMORY and an SDC event on the way.
    done = c.SubmitJob(Spec(3))->job_id();
    auto ranks = Assignments(c, workers);
    ASSERT_EQ(ranks.size(), 2u);
    Faults f;
    f.memory_step = 1;
    f.sdc_step = 2;
    Feed(c, ranks, 0, 3, f);
    Report(c, ranks, true);
    ASSERT_EQ(c.GetJob(done)->state(), v1::SUCCEEDED);
    // A 150-step job: it fails during step 20 (rank 0 had sent part of it) and restarts there,
    // then runs steps 20..39 before the coordinator goes away.
    v1::JobSpec spec = Spec(150);
    spec.set_checkpoint_every(1);
    spec.set_max_restarts(2);
    resumed = c.SubmitJob(spec)->job_id();
    ranks = Assignments(c, workers);
    ASSERT_EQ(ranks.size(), 2u);
    Feed(c, ranks, 0, 20);
    {
      v1::TelemetryBatch partial = StepBatch(ranks[0].first, ranks[0].second, 20);
      partial.clear_steps();
      v1::TelemetryAck ack;
      ASSERT_TRUE(c.IngestTelemetry(partial, &ack).ok());
    }
    Report(c, ranks, false);
    ranks = Assignments(c, workers);
    ASSERT_EQ(ranks.size(), 2u);
    ASSERT_EQ(ranks[0].second.start_step(), 20);
    Feed(c, ranks, 20, 40);
    ASSERT_EQ(c.GetJob(resumed)->steps_done(), 40);
    before = metrics.Serialize();
  }
  const auto done_before = Series(before, done), resumed_before = Series(before, resumed);
  // What the old coordinator exported, for the record.
  EXPECT_EQ(Value(done_before, "pipecoord_steps_total{job_id=\"" + done + "\"}"), "3");
  EXPECT_EQ(Value(done_before, "pipecoord_health_events_total{job_id=\"" + done + "\",kind=\"MEMORY\"}"), "1");
  EXPECT_EQ(Value(done_before, "pipecoord_health_events_total{job_id=\"" + done + "\",kind=\"SDC\"}"), "1");
  EXPECT_EQ(Value(resumed_before, "pipecoord_steps_total{job_id=\"" + resumed + "\"}"), "40");
  EXPECT_EQ(Value(resumed_before, "pipecoord_step_duration_seconds_count{job_id=\"" + resumed + "\"}"), "40");
  EXPECT_NE(Value(resumed_before, "pipecoord_straggler_score{dp=\"0\",job_id=\"" + resumed +
                                      "\",op=\"F\",rank=\"1\",score=\"relative\"}"),
            "(absent)");
  // The resumed job ran long enough to be calibrated: its idle split per rank is exported.
  EXPECT_NE(Value(resumed_before, "pipecoord_idle_seconds{cause=\"inherent\",dp=\"0\",job_id=\"" + resumed + "\",rank=\"1\"}"),
            "(absent)");
  // Every family the sink exports has series of both jobs, so the comparisons below cover them.
  for (const char* family :
       {"pipecoord_step_duration_seconds_bucket{", "pipecoord_step_duration_seconds_sum{", "pipecoord_action_duration_seconds_count{",
        "pipecoord_bubble_ratio{", "pipecoord_straggler_score{", "pipecoord_memory_peak_bytes{",
        "pipecoord_memory_budget_bytes{", "pipecoord_health_events_total{", "pipecoord_steps_total{",
        "pipecoord_predicted_step_seconds{"}) {
    for (const auto* series : {&done_before, &resumed_before}) {
      EXPECT_TRUE(std::any_of(series->begin(), series->end(), [&](const auto& kv) { return kv.first.rfind(family, 0) == 0; }))
          << family;
    }
  }

  http::PrometheusMetrics metrics;
  OnFile second = WithMetrics(path, &metrics);
  ASSERT_TRUE(second.restored.ok()) << second.restored.ToString();
  Coordinator& c = *second.c;
  const std::string after = metrics.Serialize();
  // The finished job: every series, every value, as before.
  EXPECT_EQ(Series(after, done), done_before);
  // The running one: the same, plus the restore's own event ("the coordinator restarted ...:
  // waiting ... for the job's 2 worker(s) to come back").
  auto want = resumed_before;
  const std::string lifecycle = "pipecoord_health_events_total{job_id=\"" + resumed + "\",kind=\"LIFECYCLE\"}";
  want[lifecycle] = std::to_string(std::stoi(want[lifecycle]) + 1);
  EXPECT_EQ(Series(after, resumed), want);
  for (const auto& [k, v] : Series(after, resumed)) {
    if (Value(want, k) != v) ADD_FAILURE() << k << " after " << v << " want " << Value(want, k);
  }
  for (const auto& [k, v] : want) {
    if (Value(Series(after, resumed), k) == "(absent)") ADD_FAILURE() << k << " missing, want " << v;
  }
  EndAdoption(c);  // they do not come back holding it: restarting (2 of 2) from step 40
  ASSERT_EQ(c.GetJob(resumed)->state(), v1::PENDING);
  ASSERT_EQ(c.GetJob(resumed)->start_step(), 40);

  // The workers come back; the job resumes at step 40 and runs to 150: its counters continue.
  for (const std::string& w : workers) ASSERT_EQ(RegisterCpu(c, w), w);
  auto ranks = Assignments(c, workers);
  ASSERT_EQ(ranks.size(), 2u);
  ASSERT_EQ(ranks[0].second.start_step(), 40);
  Feed(c, ranks, 40, 150);
  Report(c, ranks, true);
  ASSERT_EQ(c.GetJob(resumed)->state(), v1::SUCCEEDED);
  const auto end = Series(metrics.Serialize(), resumed);
  EXPECT_EQ(Value(end, "pipecoord_steps_total{job_id=\"" + resumed + "\"}"), "150");
  EXPECT_EQ(Value(end, "pipecoord_step_duration_seconds_count{job_id=\"" + resumed + "\"}"), "150");
  // Every action measured, once: 2 F a step on rank 0 over 150 steps, and the 2 of the step 20
  // it ran before the first restart (the histogram counts what was measured).
  EXPECT_EQ(Value(end, "pipecoord_action_duration_seconds_count{dp=\"0\",job_id=\"" + resumed +
                           "\",op=\"F\",rank=\"0\",stage=\"0\"}"),
            std::to_string(2 * 151));
}

}  // namespace
}  // namespace pipecoord::coordinator
