// In-place recovery of a lost rank at the rank level (RankRun::Resume, Executor::ResumeAt, the
// state stream to a spare), in one process over TCP loopback: a rank of a pp x dp 2 job dies
// mid-step (its data plane shut, it never comes back), the survivors are halted as the coordinator
// halts them, resume at the step every survivor's commit state allows, and a fresh RankRun takes
// the lost rank over with its replica's state. Compared with an uninterrupted RunLocally of the
// same job: every step's loss and every rank's final weights and AdamW moments, bit for bit.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "jobplan/assignment.h"
#include "jobplan/layout.h"
#include "jobplan/plan_job.h"
#include "jobplan/recovery.h"
#include "jobplan/spec_validation.h"
#include "jobplan/tiny_spec_for_tests.h"
#include "worker/daemon/local_run.h"
#include "worker/daemon/rank_run.h"
#include "worker/transport/tcp_transport.h"

namespace pipecoord::worker {
namespace {

constexpr uint64_t kSession = 7;

// The lost rank: at action `index` of step `step` its data plane goes (as a SIGKILL's would) and
// it does nothing more.
class DieAt final : public RunHooks {
 public:
  DieAt(int step, int index, std::function<void()> die) : step_(step), index_(index), die_(std::move(die)) {}
  void OnActionStart(int step, int index, const v1::Action&, int) override {
    if (step == step_ && index == index_) die_();
  }
  void OnInputReady() override {}
  void OnActionDone() override {}
  Status BeforeCompute(int, const v1::Action&, const std::atomic<bool>&) override { return Status::Ok(); }
  void AfterCompute(int, const v1::Action&, int64_t) override {}
  Result<uint64_t> Probe(int, const ProbeGemmFn&) override { return uint64_t{0}; }
  uint64_t OomBytes(int) override { return 0; }

 private:
  int step_, index_;
  std::function<void()> die_;
};

struct Case {
  std::string schedule;
  int pp;
  int lost;        // global rank
  int step;        // it dies at action `index` of this step
  int index;       // -1: at its OPT (before it enters the step's commit)
  bool shrink = false;  // no spare: the job goes on with dp 1 and twice the micro-batches
  int tp = 1;           // tensor parallelism: the lost rank's group is formed again
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.schedule << " pp " << c.pp << ", global rank " << c.lost << " lost at step " << c.step << ", action "
      << c.index << (c.shrink ? ", shrink" : "") << (c.tp > 1 ? ", tp " + std::to_string(c.tp) : "");
}

std::string Name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string s = c.schedule + "_pp" + std::to_string(c.pp) + "_lost" + std::to_string(c.lost) + "_step" +
                  std::to_string(c.step) + "_at" + (c.index < 0 ? std::string("opt") : std::to_string(c.index)) +
                  (c.shrink ? "_shrink" : "") + (c.tp > 1 ? "_tp" + std::to_string(c.tp) : "");
  for (char& ch : s) {
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return s;
}

class InPlaceRecoveryTest : public testing::TestWithParam<Case> {};

TEST_P(InPlaceRecoveryTest, TheJobGoesOnAsIfUninterrupted) {
  const Case c = GetParam();
  v1::JobSpec raw = jobplan::TinySpec(c.pp, c.schedule);
  raw.set_dp(2);
  raw.set_tp(c.tp);
  raw.set_steps(std::max(5, c.step + 2));
  raw.mutable_model()->set_layers(c.pp * 2);
  ASSERT_TRUE(jobplan::ValidateJobSpec(raw).ok());
  const v1::JobSpec spec = jobplan::WithDefaults(raw);
  ASSERT_EQ(jobplan::InPlaceRecoveryRefusal(spec), "");
  auto baseline = RunLocally(spec, {}, {}, /*keep_final_state=*/true);
  ASSERT_TRUE(baseline.ok()) << baseline.status().ToString();
  const std::vector<double> want = StepLosses(*baseline);

  auto plan = jobplan::PlanJob(spec);
  ASSERT_TRUE(plan.ok());
  const RankLayout layout = jobplan::LayoutOf(spec);
  const int world = layout.world();
  int lost_opt = -1;  // the position of the lost rank's OPT
  for (int i = 0; i < plan->ranks(layout.PipelineRank(c.lost)).actions_size(); ++i) {
    if (plan->ranks(layout.PipelineRank(c.lost)).actions(i).op() == v1::OPT) lost_opt = i;
  }
  const int die_index = c.index < 0 ? lost_opt : c.index;

  // Phase 1: every rank runs until the lost one dies; the survivors are halted.
  std::vector<std::unique_ptr<TcpTransport>> links(world);
  std::vector<std::string> endpoints;
  for (int g = 0; g < world; ++g) {
    auto t = TcpTransport::Listen("127.0.0.1", 0);
    ASSERT_TRUE(t.ok());
    endpoints.push_back((*t)->endpoint());
    links[g] = std::move(t).value();
  }
  std::vector<v1::Assignment> assignments;
  for (int g = 0; g < world; ++g) assignments.push_back(jobplan::BuildAssignment("job", spec, *plan, g, endpoints, kSession));
  std::mutex mu;
  std::vector<std::map<int, v1::StepSummary>> reported(world);  // by rank, step (each once)
  int repeats = 0;
  // The lost rank may have reported a step whose commit no survivor passed (its last chunks died
  // with it): the spare computes it again, bit for bit (the coordinator keeps the first record).
  int lost_repeats = 0;
  auto report_to = [&](int g) {
    return [&, g](StepReport&& r) {
      std::lock_guard<std::mutex> lock(mu);
      auto [it, fresh] = reported[g].emplace(r.summary.step(), r.summary);
      if (fresh) return Status::Ok();
      if (g != c.lost) {
        ++repeats;
      } else {
        ++lost_repeats;
        EXPECT_EQ(it->second.has_loss(), r.summary.has_loss());
        EXPECT_EQ(it->second.loss(), r.summary.loss()) << "step " << r.summary.step() << " computed again differs";
      }
      return Status::Ok();
    };
  };
  std::atomic<bool> died{false};
  DieAt die(c.step, die_index, [&] {
    links[c.lost]->Shutdown();
    died = true;
  });
  std::vector<std::unique_ptr<RankRun>> ranks(world);
  std::vector<Status> first(world);
  std::vector<std::thread> threads;
  for (int g = 0; g < world; ++g) {
    RankRunOptions options;
    options.connect_timeout = std::chrono::milliseconds(10000);
    if (g == c.lost) options.hooks = &die;
    ranks[g] = std::make_unique<RankRun>(assignments[g], std::move(options));
    threads.emplace_back([&, g] {
      RankRunCallbacks cb;
      cb.on_step = report_to(g);
      first[g] = ranks[g]->Run([&](const v1::Assignment&) -> Result<TcpTransport*> { return links[g].get(); }, cb);
    });
  }
  while (!died) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // The coordinator halts the survivors once it knows the rank is lost (some are still blocked on
  // a live peer that is itself stuck).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (int g = 0; g < world; ++g) {
    if (ranks[g]->executor() != nullptr) ranks[g]->executor()->Cancel();
    links[g]->Shutdown();
  }
  for (auto& t : threads) t.join();
  threads.clear();
  for (int g = 0; g < world; ++g) ASSERT_FALSE(first[g].ok()) << "global rank " << g << " ran to the end";

  // Where the job resumes: the furthest commit a survivor passed.
  int committed = -1;
  std::map<std::pair<int, int>, double> commit_loss;  // (global rank, step) -> loss, from the commits
  for (int g = 0; g < world; ++g) {
    if (g == c.lost) continue;
    const v1::CommitState s = ranks[g]->executor()->commit_state();
    committed = std::max(committed, s.committed_step());
    for (const v1::CommitLosses& l : s.losses()) {
      for (int k = 0; k < l.global_rank_size(); ++k) commit_loss[{l.global_rank(k), l.step()}] = l.loss(k);
    }
  }
  for (int g = 0; g < world; ++g) {
    if (g == c.lost) continue;
    const v1::CommitState s = ranks[g]->executor()->commit_state();
    EXPECT_TRUE(s.committed_step() == committed || (s.committed_step() == committed - 1 && s.prepared_step() == committed))
        << "global rank " << g << ": " << s.ShortDebugString();
    // Every commit it passed still carries its losses (a lost rank's telemetry may lag by many).
    EXPECT_EQ(s.losses_size(), s.committed_step() + 1) << "global rank " << g;
  }
  // The step in flight when the rank died, or the one before it when the rank died just past a
  // commit no survivor passed.
  const int resume = committed + 1;
  EXPECT_GE(resume, c.step - 1);
  EXPECT_LE(resume, c.step + 1);

  if (c.shrink) {
    // Phase 2 without a spare: replica 0 of a dp 1 job with twice the micro-batches, each rank's
    // state moved into its new backend in memory; the lost replica's other ranks are let go.
    v1::JobSpec shrunk = spec;
    shrunk.set_dp(1);
    shrunk.set_microbatches(spec.microbatches() * 2);
    auto plan2 = jobplan::PlanJob(shrunk);
    ASSERT_TRUE(plan2.ok());
    const RankLayout layout2 = jobplan::LayoutOf(shrunk);
    std::vector<int> old_of(layout2.world());  // new global rank -> old
    for (int g = 0; g < world; ++g) {
      if (layout.DataRank(g) != layout.DataRank(c.lost)) {
        old_of[layout2.Global({layout.PipelineRank(g), 0, layout.TensorRank(g)})] = g;
      }
    }
    std::vector<std::unique_ptr<TcpTransport>> links2(layout2.world());
    std::vector<std::string> endpoints2;
    for (auto& link : links2) {
      auto t = TcpTransport::Listen("127.0.0.1", 0);
      ASSERT_TRUE(t.ok());
      endpoints2.push_back((*t)->endpoint());
      link = std::move(t).value();
    }
    std::vector<v1::Assignment> reshaped;
    for (int g2 = 0; g2 < layout2.world(); ++g2) {
      v1::Assignment a = jobplan::BuildAssignment("job", shrunk, *plan2, g2, endpoints2, kSession);
      a.set_start_step(resume);
      a.mutable_recovery()->set_generation(1);
      a.mutable_recovery()->set_resume_step(resume);
      a.mutable_recovery()->set_state_from(-1);
      reshaped.push_back(std::move(a));
    }
    std::vector<Status> second(layout2.world());
    for (int g2 = 0; g2 < layout2.world(); ++g2) {
      threads.emplace_back([&, g2] {
        RankRunCallbacks cb;
        cb.on_step = report_to(old_of[g2]);
        second[g2] = ranks[old_of[g2]]->Reshape(
            reshaped[g2], [&](const v1::Assignment&) -> Result<TcpTransport*> { return links2[g2].get(); }, cb);
      });
    }
    for (auto& t : threads) t.join();
    for (int g2 = 0; g2 < layout2.world(); ++g2) EXPECT_TRUE(second[g2].ok()) << second[g2].ToString();
    EXPECT_EQ(repeats, 0);
    // Before the resume step, the old layout's records (completed from the commits, as the
    // coordinator does); from it on, the new one's. The same samples per step: the losses agree
    // up to the order of the gradient's additions.
    for (int step = 0; step < spec.steps(); ++step) {
      double sum = 0;
      int count = 0;
      for (int g = 0; g < world; ++g) {
        if (step >= resume && layout.DataRank(g) == layout.DataRank(c.lost)) continue;
        auto it = reported[g].find(step);
        if (it != reported[g].end()) {
          if (it->second.has_loss()) sum += it->second.loss(), ++count;
        } else if (auto l = commit_loss.find({g, step}); l != commit_loss.end()) {
          sum += l->second, ++count;
        }
      }
      ASSERT_EQ(count, (step < resume ? 2 : 1) * c.tp) << "step " << step;  // every rank of the head's group
      EXPECT_NEAR(sum / count, want[step], 1e-6 * std::abs(want[step])) << "step " << step;
    }
    for (int g2 = 0; g2 < layout2.world(); ++g2) {
      EXPECT_EQ(ranks[old_of[g2]]->backend()->optimizer_steps(), spec.steps());
      EXPECT_EQ(RankRun::GlobalRank(ranks[old_of[g2]]->assignment()), g2);
      links2[g2]->Shutdown();
    }
    return;
  }

  // Phase 2: a new data plane; the spare gets the lost rank's state from its replica.
  std::vector<std::unique_ptr<TcpTransport>> links2(world);
  std::vector<std::string> endpoints2;
  for (int g = 0; g < world; ++g) {
    auto t = TcpTransport::Listen("127.0.0.1", 0);
    ASSERT_TRUE(t.ok());
    endpoints2.push_back((*t)->endpoint());
    links2[g] = std::move(t).value();
  }
  const int source = layout.AtDataRank(c.lost, (layout.DataRank(c.lost) + 1) % layout.dp());
  v1::Recovery recovery;
  recovery.set_generation(1);
  recovery.set_resume_step(resume);
  recovery.set_state_from(-1);
  for (int g = 0; g < world; ++g) {
    v1::Peer* p = recovery.add_peers();
    p->set_global_rank(g);
    p->set_data_endpoint(endpoints2[g]);
  }
  v1::Assignment spare_assignment = jobplan::BuildAssignment("job", spec, *plan, c.lost, endpoints2, kSession);
  spare_assignment.set_start_step(resume);
  *spare_assignment.mutable_recovery() = recovery;
  spare_assignment.mutable_recovery()->set_state_from(source);
  ranks[c.lost] = std::make_unique<RankRun>(spare_assignment, RankRunOptions{});
  std::vector<Status> second(world);
  for (int g = 0; g < world; ++g) {
    threads.emplace_back([&, g] {
      RankRunCallbacks cb;
      cb.on_step = report_to(g);
      auto source_fn = [&](const v1::Assignment&) -> Result<TcpTransport*> { return links2[g].get(); };
      if (g == c.lost) {
        second[g] = ranks[g]->Run(source_fn, cb);
      } else {
        v1::Recovery mine = recovery;
        if (g == source) mine.add_state_to(c.lost);
        second[g] = ranks[g]->Resume(mine, source_fn, cb);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int g = 0; g < world; ++g) EXPECT_TRUE(second[g].ok()) << "global rank " << g << ": " << second[g].ToString();
  EXPECT_EQ(repeats, 0) << "a step was reported twice by a rank that was not lost";
  EXPECT_LE(lost_repeats, 1);
  EXPECT_GT(ranks[c.lost]->state_bytes_moved(), 0u);
  EXPECT_EQ(ranks[c.lost]->state_bytes_moved(), ranks[source]->state_bytes_moved());

  // Every step once per rank; the lost rank's steps it never reported come from the commits.
  std::vector<double> sum(spec.steps(), 0.0), count(spec.steps(), 0.0);
  for (int g = 0; g < world; ++g) {
    for (int step = 0; step < spec.steps(); ++step) {
      auto it = reported[g].find(step);
      std::optional<double> loss;
      if (it != reported[g].end()) {
        if (it->second.has_loss()) loss = it->second.loss();
      } else {
        ASSERT_EQ(g, c.lost) << "global rank " << g << " never reported step " << step;
        ASSERT_LT(step, resume);
        if (auto l = commit_loss.find({g, step}); l != commit_loss.end()) loss = l->second;
      }
      if (loss) {
        sum[step] += *loss;
        count[step] += 1;
      }
    }
  }
  for (int step = 0; step < spec.steps(); ++step) {
    ASSERT_EQ(count[step], 2 * c.tp) << "step " << step << ": a loss per replica (and tensor-parallel rank)";
    EXPECT_EQ(sum[step] / count[step], want[step]) << "step " << step;
  }
  for (int g = 0; g < world; ++g) {
    size_t compared = 0;
    for (const StateTensor& t : ranks[g]->backend()->CheckpointState()) {
      const std::vector<float>& expected = baseline->final_state[g].at(t.name);
      ASSERT_EQ(t.data.size(), expected.size()) << t.name;
      EXPECT_EQ(std::memcmp(t.data.data(), expected.data(), t.data.size_bytes()), 0) << "global rank " << g << ": " << t.name;
      ++compared;
    }
    EXPECT_EQ(compared, baseline->final_state[g].size());
    EXPECT_EQ(ranks[g]->backend()->optimizer_steps(), spec.steps());
  }
  for (int g = 0; g < world; ++g) links2[g]->Shutdown();
}

INSTANTIATE_TEST_SUITE_P(
    LostRanks, InPlaceRecoveryTest,
    testing::Values(
        // pp 2 x dp 2: the head of replica 1 mid-step, then at its OPT (a survivor may wait in
        // the commit: it rolls back), then at a step's first action (its commit passed: the
        // others apply the step it committed)
        Case{"1f1b", 2, 3, 2, 3, }, Case{"1f1b", 2, 3, 2, -1}, Case{"1f1b", 2, 1, 3, 0}, Case{"1f1b", 2, 3, 7, 2},
        // zero-bubble (B and W apart) and interleaved schedules, pp 4 x dp 2
        Case{"zbh1", 4, 5, 1, 4}, Case{"interleaved", 4, 2, 2, -1}, Case{"zbv", 4, 6, 3, 0},
        // no spare: dp 2 -> 1 with twice the micro-batches, replica 1 or replica 0 lost
        Case{"1f1b", 2, 3, 2, 3, true}, Case{"zbh1", 4, 1, 2, -1, true},
        // tp 2 x pp 2 x dp 2: a tensor-parallel rank of replica 1's head (global 7) lost; the group is
        // formed again on the new data plane (a spare), or the replica dropped (no spare)
        Case{"1f1b", 2, 7, 2, 3, false, 2}, Case{"zbv", 2, 6, 3, -1, false, 2}, Case{"1f1b", 2, 7, 2, 3, true, 2}),
    Name);

}  // namespace
}  // namespace pipecoord::worker
