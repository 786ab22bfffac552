// A job restarted from its checkpoints trains exactly as if it had never stopped: the losses of
// the resumed steps equal an uninterrupted run's, bit for bit, for several schedules.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <tuple>

#include "jobplan/tiny_spec_for_tests.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/daemon/local_run.h"

namespace pipecoord::worker {
namespace {

using ::testing::HasSubstr;

// jobplan's tiny job (4 micro-batches of 2, 4 layers, sequence 8) with a narrower model (hidden 16,
// 2 heads, vocabulary 32, seed 5). Not jobplan::TestSpec: it applies WithDefaults, which would fix
// ffnHidden and dataSeed from its own hidden and seed before these are set.
v1::JobSpec Spec(const std::string& schedule, int pp, int vpp, int dp, int steps, int tp = 1, int zero = 0) {
  v1::JobSpec s = jobplan::TinySpec(pp, schedule);
  s.clear_name();
  s.set_vpp(vpp);
  s.set_dp(dp);
  s.set_tp(tp);
  s.set_zero(zero);
  s.set_steps(steps);
  auto* m = s.mutable_model();
  m->set_hidden(16);
  m->set_heads(2);
  m->set_vocab(32);
  m->set_seed(5);
  return s;
}

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

struct Case {
  std::string schedule;
  int pp, vpp, dp;
  int tp = 1;
  int zero = 0;
};

class CheckpointResumeTest : public ::testing::TestWithParam<Case> {};

TEST_P(CheckpointResumeTest, ResumedRunEqualsTheUninterruptedRun) {
  const Case c = GetParam();
  auto whole = RunLocally(Spec(c.schedule, c.pp, c.vpp, c.dp, 6, c.tp, c.zero));
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const std::vector<double> want = StepLosses(*whole);
  ASSERT_EQ(want.size(), 6u);

  // The first attempt checkpoints every 2 steps and stops after step 3 (as if its worker died
  // during step 4); the second starts at step 4 from the checkpoints of step 3.
  LocalCheckpoints ck;
  ck.dir = FreshDir("ckpt-" + c.schedule + "-tp" + std::to_string(c.tp) + "-zero" + std::to_string(c.zero));
  v1::JobSpec first = Spec(c.schedule, c.pp, c.vpp, c.dp, 4, c.tp, c.zero);
  first.set_checkpoint_every(2);
  auto before = RunLocally(first, {}, ck);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  // Steps 1 and 3 are checkpointed, each reported once it is on disk: step 1's while step 2 or 3
  // runs (written in the background), step 3's, the last, in its own report.
  for (const auto& rank : before->reports) {
    std::vector<int> saved;
    for (const StepReport& r : rank) {
      for (int s : r.summary.checkpointed_steps()) {
        EXPECT_GE(r.summary.step(), s);
        EXPECT_LE(r.summary.step(), s + 2);
        saved.push_back(s);
      }
    }
    EXPECT_EQ(saved, (std::vector<int>{1, 3}));
    ASSERT_EQ(rank.size(), 4u);
    ASSERT_GT(rank[3].summary.checkpointed_steps_size(), 0);
    EXPECT_EQ(rank[3].summary.checkpointed_steps(rank[3].summary.checkpointed_steps_size() - 1), 3);
  }
  v1::JobSpec second = Spec(c.schedule, c.pp, c.vpp, c.dp, 6, c.tp, c.zero);
  second.set_checkpoint_every(2);
  ck.start_step = 4;
  auto after = RunLocally(second, {}, ck);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  for (const auto& rank : after->reports) {
    ASSERT_EQ(rank.size(), 2u);  // steps 4 and 5 only
    EXPECT_EQ(rank[0].summary.step(), 4);
  }
  std::vector<double> got = StepLosses(*before);
  const std::vector<double> resumed = StepLosses(*after);
  got.insert(got.end(), resumed.begin() + 4, resumed.end());
  EXPECT_EQ(got, want);  // exact: weights, AdamW moments and step count all restored
}

INSTANTIATE_TEST_SUITE_P(Schedules, CheckpointResumeTest,
                         ::testing::Values(Case{"1f1b", 2, 1, 1}, Case{"interleaved", 2, 2, 1}, Case{"zbv", 2, 2, 1},
                                           Case{"zbh1", 2, 1, 2},
                                           // Each tensor-parallel rank saves and restores its own slices.
                                           Case{"zbh1", 2, 1, 2, 2},
                                           // Each ZeRO-1 replica saves and restores its moment shard.
                                           Case{"zbh1", 2, 1, 2, 1, 1}, Case{"zbh1", 2, 1, 2, 2, 1},
                                           Case{"zbh1", 2, 1, 2, 1, 2}),
                         [](const auto& info) {
                           const std::string tp = (info.param.tp > 1 ? "_tp" + std::to_string(info.param.tp) : "") +
                                                  (info.param.zero > 0 ? "_zero" + std::to_string(info.param.zero) : "");
                           return (info.param.schedule == "zbh1" ? std::string("zbh1_dp2") : info.param.schedule == "1f1b" ? std::string("one_f_one_b") : info.param.schedule) + tp;
                         });

// A ZeRO-1 job's checkpoints (each replica its moment shard) resume under another number of
// replicas: every rank reads its stages' values and gathers the moments it now holds from every
// old replica's file. The same global batch (dp x micro-batches) gives the same samples per step,
// so the resumed losses equal the uninterrupted run's up to the order of the gradient's additions.
TEST(CheckpointResumeTest, AZeroCheckpointResumesUnderAnotherDataParallelDegree) {
  auto whole = RunLocally(Spec("zbh1", 2, 1, 2, 6, 1, 1));
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const std::vector<double> want = StepLosses(*whole);
  LocalCheckpoints ck;
  ck.dir = FreshDir("ckpt-reshard");
  v1::JobSpec first = Spec("zbh1", 2, 1, 2, 4, 1, 1);
  first.set_checkpoint_every(2);
  ASSERT_TRUE(RunLocally(first, {}, ck).ok());
  // dp 1 (no ZeRO: whole moments, 8 micro-batches) and dp 4 (ZeRO-1 shards of a quarter, 2 each).
  for (auto [dp, zero, microbatches] : {std::tuple{1, 0, 8}, std::tuple{4, 1, 2}}) {
    SCOPED_TRACE("dp " + std::to_string(dp));
    v1::JobSpec second = Spec("zbh1", 2, 1, dp, 6, 1, zero);
    second.set_microbatches(microbatches);
    LocalCheckpoints resume = ck;
    resume.start_step = 4;
    resume.checkpoint_dp = 2;
    auto after = RunLocally(second, {}, resume);
    ASSERT_TRUE(after.ok()) << after.status().ToString();
    const std::vector<double> got = StepLosses(*after);
    for (int step = 4; step < 6; ++step) EXPECT_NEAR(got[step], want[step], 1e-6 * want[step]) << "step " << step;
    // Without the old layout named, the rank's own file is another layout's: refused by name.
    resume.checkpoint_dp = 0;
    auto unnamed = RunLocally(second, {}, resume);
    EXPECT_FALSE(unnamed.ok());
  }
}

// The moments a reshard gathers are the moments: a ZeRO-1 run's shards of step 3, gathered into
// whole tensors, equal a ZeRO-0 run's whole moments of the same step bit for bit (with two
// replicas the reduce-scatter and the all-reduce add the same two terms).
TEST(CheckpointResumeTest, GatheredZeroShardsEqualTheUnshardedRunsMoments) {
  LocalCheckpoints sharded, unsharded;
  sharded.dir = FreshDir("ckpt-zero1");
  unsharded.dir = FreshDir("ckpt-zero0");
  v1::JobSpec spec = Spec("1f1b", 2, 1, 2, 4, 1, 1);
  spec.set_checkpoint_every(2);
  ASSERT_TRUE(RunLocally(spec, {}, sharded).ok());
  spec.set_zero(0);
  ASSERT_TRUE(RunLocally(spec, {}, unsharded).ok());
  for (int pipeline = 0; pipeline < 2; ++pipeline) {
    // Global ranks of pipeline rank p: p (replica 0) and 2 + p (replica 1).
    auto reference = CheckpointFile::Read(CheckpointPath(unsharded.dir, "local", pipeline, 3));
    ASSERT_TRUE(reference.ok()) << reference.status().ToString();
    std::vector<CheckpointFile> shards;
    int cut = 0;  // moments of a tensor the shard boundary cuts: "NAME/adam_m@BEGIN"
    for (int g : {pipeline, 2 + pipeline}) {
      auto f = CheckpointFile::Read(CheckpointPath(sharded.dir, "local", g, 3));
      ASSERT_TRUE(f.ok()) << f.status().ToString();
      for (const std::string& name : f->Names()) cut += name.find('@') != std::string::npos;
      EXPECT_LT(f->Names().size(), reference->Names().size());  // half the moments each
      shards.push_back(std::move(f).value());
    }
    EXPECT_GT(cut, 0);
    std::vector<std::vector<float>> storage;
    std::vector<StateTensor> whole;
    for (const std::string& name : reference->Names()) storage.emplace_back(reference->Find(name).size(), -1.0f);
    int i = 0;
    for (const std::string& name : reference->Names()) whole.push_back({name, storage[i++]});
    auto info = ReshardInto(shards, whole);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->step, 3);
    EXPECT_EQ(info->optimizer_steps, 4);
    for (size_t k = 0; k < whole.size(); ++k) {
      const std::span<const float> want = reference->Find(whole[k].name);
      EXPECT_EQ(std::memcmp(whole[k].data.data(), want.data(), want.size_bytes()), 0) << whole[k].name;
    }
    // A piece missing (one replica's file only) leaves elements uncovered: refused, naming one.
    auto partial = ReshardInto({shards[0]}, whole);
    EXPECT_EQ(partial.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(partial.status().message(), HasSubstr("is in none of its files"));
  }
}

// No coordinator tells this run its restart point, so every file from the start on is kept (a
// worker deletes a file only once the coordinator confirmed a later restart point).
TEST(CheckpointResumeTest, EachRankKeepsEveryCheckpointFromItsRestartPointOn) {
  LocalCheckpoints ck;
  ck.dir = FreshDir("ckpt-keep");
  v1::JobSpec spec = Spec("1f1b", 2, 1, 1, 7);
  spec.set_checkpoint_every(1);
  ASSERT_TRUE(RunLocally(spec, {}, ck).ok());
  for (int g = 0; g < 2; ++g) {
    for (int step = 0; step < 7; ++step) {
      EXPECT_TRUE(std::filesystem::exists(CheckpointPath(ck.dir, "local", g, step))) << g << " " << step;
    }
  }
}

TEST(CheckpointResumeTest, MissingOrForeignCheckpointsAreClearErrors) {
  LocalCheckpoints ck;
  ck.dir = FreshDir("ckpt-errors");
  v1::JobSpec spec = Spec("1f1b", 2, 1, 1, 4);
  spec.set_checkpoint_every(2);
  ASSERT_TRUE(RunLocally(spec, {}, ck).ok());
  // Step 2 was not checkpointed (every 2: steps 1 and 3).
  ck.start_step = 3;
  auto missing = RunLocally(spec, {}, ck);
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("resuming at step 3: checkpoint " + ck.dir + "/local/rank-"));
  EXPECT_THAT(missing.status().message(), HasSubstr("/step-2.safetensors: not found"));
  // Another model's checkpoint (wider layers) does not load into this one.
  v1::JobSpec wider = spec;
  wider.mutable_model()->set_hidden(32);
  ck.start_step = 4;
  auto foreign = RunLocally(wider, {}, ck);
  EXPECT_EQ(foreign.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(foreign.status().message(), HasSubstr("elements, this rank's has"));
  // A job that checkpoints needs a directory.
  auto no_dir = RunLocally(spec, {}, LocalCheckpoints{});
  EXPECT_EQ(no_dir.status().code(), Code::kFailedPrecondition);
  EXPECT_THAT(no_dir.status().message(),  // either rank may fail first
              HasSubstr(": spec.checkpointEvery: the job saves checkpoints but this worker has no --checkpoint-dir"));
}

}  // namespace
}  // namespace pipecoord::worker
