// Training on a token dataset (spec.data): each data-parallel replica reads its own disjoint
// sequences; a run resumed from its checkpoints reads the same tokens and gets the same losses
// (training and validation) as an uninterrupted run; validation (spec.evalEvery) runs forward
// only, after the right steps, and changes no weight.
#include "worker/daemon/training_data.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "data/byte_dataset_writer.h"
#include "jobplan/spec_validation.h"
#include "jobplan/tiny_spec_for_tests.h"
#include "worker/daemon/local_run.h"

namespace pipecoord::worker {
namespace {

using ::testing::HasSubstr;

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A flat uint16 dataset whose token i is i: a sequence's first input tells its window.
std::string WriteCountingDataset(const std::string& dir, int tokens) {
  std::string bin;
  for (int i = 0; i < tokens; ++i) {
    bin.push_back(static_cast<char>(i & 0xff));
    bin.push_back(static_cast<char>(i >> 8));
  }
  std::ofstream(dir + "/count.bin", std::ios::binary) << bin;
  std::ofstream(dir + "/count.json") << "{\"dtype\": \"uint16\", \"vocab_size\": " << tokens << "}";
  return dir + "/count";
}

// Byte-level text through `pipectl data prepare`'s writer: DIR/text/{train,val}.{bin,json}.
std::string WriteTextDataset(const std::string& dir) {
  std::string text;
  for (int i = 0; i < 300; ++i) {
    text += "pipeline " + std::to_string(i % 17) + " moves micro-batches; the bubble shrinks as m grows.\n";
  }
  std::ofstream(dir + "/in.txt") << text;
  data::ByteDatasetOptions o;
  o.inputs = {dir + "/in.txt"};
  o.out_dir = dir + "/text";
  o.val_fraction = 0.1;
  EXPECT_TRUE(data::WriteByteDataset(o).ok());
  return dir + "/text";
}

// jobplan's tiny 1f1b job (4 micro-batches of 2, 4 layers, sequence 8) with a narrower model
// (hidden 16, 2 heads, seed 5) over the byte vocabulary (256), with defaults applied.
v1::JobSpec Spec(int pp, int dp, int steps, const std::string& data) {
  v1::JobSpec s = jobplan::TinySpec(pp);
  s.clear_name();
  s.set_dp(dp);
  s.set_steps(steps);
  auto* m = s.mutable_model();
  m->set_hidden(16);
  m->set_heads(2);
  m->set_vocab(256);
  m->set_seed(5);
  if (!data.empty()) s.mutable_data()->set_path(data);
  return jobplan::WithDefaults(s);
}

TEST(TrainingData, ReplicasReadDisjointSequencesEveryStep) {
  const std::string prefix = WriteCountingDataset(FreshDir("td-disjoint"), 4000);
  v1::JobSpec spec = Spec(2, 3, 1, prefix);
  spec.mutable_model()->set_vocab(4000);
  std::vector<std::shared_ptr<const TrainingData>> replicas;
  for (int d = 0; d < 3; ++d) {
    auto t = TrainingData::Open(spec, d);
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_TRUE((*t)->from_dataset());
    replicas.push_back(*t);
  }
  // 499 windows of 8 tokens; a step reads 3 x 4 x 2 = 24 of them, 20 steps an epoch.
  for (int step = 0; step < 25; ++step) {
    std::set<int32_t> windows;
    for (int d = 0; d < 3; ++d) {
      for (int mb = 0; mb < 4; ++mb) {
        auto b = replicas[d]->Train(step, mb);
        ASSERT_TRUE(b.ok());
        for (int row = 0; row < 2; ++row) {
          const int32_t first = b->inputs[row * 8];
          EXPECT_EQ(first % 8, 0);
          for (int t = 0; t < 8; ++t) {
            EXPECT_EQ(b->inputs[row * 8 + t], first + t);
            EXPECT_EQ(b->targets[row * 8 + t], first + t + 1);
          }
          windows.insert(first);
        }
      }
    }
    EXPECT_EQ(windows.size(), 24u) << "step " << step;  // no window read twice in a step
  }
  // A worker that opens the data again (a restart) reads the very same tokens at any step.
  auto again = TrainingData::Open(spec, 1);
  ASSERT_TRUE(again.ok());
  for (int step : {0, 7, 19, 20, 23}) {
    EXPECT_EQ((*again)->Train(step, 2)->inputs, replicas[1]->Train(step, 2)->inputs) << step;
  }
  // Validation asks for a split this data does not have.
  EXPECT_EQ(replicas[0]->Validation(0).status().code(), Code::kFailedPrecondition);
}

TEST(TrainingData, WithoutDataTheSyntheticStreamStays) {
  auto t = TrainingData::Open(Spec(2, 1, 1, ""), 0);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE((*t)->from_dataset());
  model::SyntheticData synthetic(5, 256, 8, 2);
  EXPECT_EQ((*t)->Train(3, 1)->inputs, synthetic.Batch(3, 1).inputs);
}

std::vector<std::pair<int, double>> ValLosses(const LocalRunResult& r) {
  std::vector<std::pair<int, double>> out;
  for (const auto& rank : r.reports) {
    for (const StepReport& s : rank) {
      if (s.summary.has_val_loss()) out.push_back({s.summary.step(), s.summary.val_loss()});
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Validation under tensor and sequence parallelism: a tp 2 + sp job's validation losses (every
// rank of the head's group reports them) equal the tp 1 job's on the same dataset within 1e-6:
// the forward passes token shards between stages and gathers them inside each region.
TEST(TrainingData, ValidationUnderSequenceParallelismEqualsTp1) {
  const std::string dir = FreshDir("td-sp");
  v1::JobSpec spec = Spec(2, 1, 3, WriteTextDataset(dir));
  spec.set_eval_every(1);
  spec.set_eval_batches(2);
  auto one = RunLocally(spec);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  spec.set_tp(2);
  spec.set_sequence_parallel(true);
  ASSERT_TRUE(jobplan::ValidateJobSpec(spec).ok()) << jobplan::ValidateJobSpec(spec).ToString();
  auto sp = RunLocally(spec);
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  const auto want = ValLosses(*one), got = ValLosses(*sp);
  ASSERT_EQ(want.size(), 3u);
  ASSERT_EQ(got.size(), 6u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i / 2].first);
    EXPECT_NEAR(got[i].second, want[i / 2].second, 1e-6 * want[i / 2].second) << i;
  }
}

TEST(TrainingData, ResumedRunSeesTheSameTokensAndLosses) {
  const std::string dir = FreshDir("td-resume");
  const std::string data = WriteTextDataset(dir);
  v1::JobSpec whole_spec = Spec(2, 2, 6, data);
  whole_spec.set_eval_every(2);
  whole_spec.set_eval_batches(2);
  auto whole = RunLocally(whole_spec);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const std::vector<double> want = StepLosses(*whole);
  ASSERT_EQ(want.size(), 6u);
  // Validation after steps 1, 3, 5, from the head rank of each replica (global ranks 1 and 3).
  const auto want_val = ValLosses(*whole);
  ASSERT_EQ(want_val.size(), 6u);
  EXPECT_EQ(want_val[0].first, 1);
  EXPECT_EQ(want_val[2].first, 3);
  EXPECT_EQ(want_val[4].first, 5);
  // Loss falls on this repetitive text, and the data is really read: not the synthetic losses.
  auto synthetic = RunLocally(Spec(2, 2, 6, ""));
  ASSERT_TRUE(synthetic.ok());
  EXPECT_NE(StepLosses(*synthetic), want);

  // Stopped after step 3 (checkpoints every 2), resumed at step 4 with data opened afresh.
  LocalCheckpoints ck;
  ck.dir = dir + "/ckpt";
  v1::JobSpec first = Spec(2, 2, 4, data);
  first.set_checkpoint_every(2);
  first.set_eval_every(2);
  first.set_eval_batches(2);
  auto before = RunLocally(first, {}, ck);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  v1::JobSpec second = whole_spec;
  second.set_checkpoint_every(2);
  ck.start_step = 4;
  auto after = RunLocally(second, {}, ck);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  std::vector<double> got = StepLosses(*before);
  const std::vector<double> resumed = StepLosses(*after);
  ASSERT_EQ(resumed.size(), 6u);  // indexed by step; 4 and 5 ran
  got.insert(got.end(), resumed.begin() + 4, resumed.end());
  EXPECT_EQ(got, want);  // exact: the same tokens at every step, the same weights
  auto got_val = ValLosses(*before);
  const auto resumed_val = ValLosses(*after);
  got_val.insert(got_val.end(), resumed_val.begin(), resumed_val.end());
  EXPECT_EQ(got_val, want_val);
}

TEST(TrainingData, ValidationChangesNoWeight) {
  const std::string data = WriteTextDataset(FreshDir("td-noupdate"));
  v1::JobSpec plain = Spec(2, 1, 4, data);
  v1::JobSpec evaluated = plain;
  evaluated.set_eval_every(1);
  evaluated.set_eval_batches(3);
  auto a = RunLocally(plain);
  auto b = RunLocally(evaluated);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(StepLosses(*a), StepLosses(*b));  // bit for bit: validation took no step
  const auto val = ValLosses(*b);
  ASSERT_EQ(val.size(), 4u);
  for (const auto& [step, loss] : val) EXPECT_GT(loss, 0) << step;
  // Evaluated at step 3 with the weights after step 3: below the first evaluation's loss.
  EXPECT_LT(val[3].second, val[0].second);
}

TEST(TrainingData, ValidationOnInterleavedAndVShapedPlacements) {
  const std::string data = WriteTextDataset(FreshDir("td-vshape"));
  std::vector<double> first;
  for (const auto& [schedule, vpp] : std::vector<std::pair<std::string, int>>{{"1f1b", 1}, {"interleaved", 2}, {"zbv", 2}}) {
    v1::JobSpec s = Spec(2, 1, 2, data);
    s.set_schedule(schedule);
    s.set_vpp(vpp);
    s.set_eval_every(1);
    auto r = RunLocally(jobplan::WithDefaults(s));
    ASSERT_TRUE(r.ok()) << schedule << ": " << r.status().ToString();
    const auto val = ValLosses(*r);
    ASSERT_EQ(val.size(), 2u) << schedule;
    // Before any update the model is the same under every placement: step 0's validation too.
    first.push_back(val[0].second);
  }
  EXPECT_NEAR(first[1], first[0], 1e-5);
  EXPECT_NEAR(first[2], first[0], 1e-5);
}

TEST(TrainingData, ADatasetChangedAfterSubmitFailsTheRankNamingTheFile) {
  const std::string dir = FreshDir("td-changed");
  const std::string data = WriteTextDataset(dir);
  std::ofstream(data + "/train.bin", std::ios::app) << "x";  // a partial token appended
  auto r = RunLocally(Spec(2, 1, 1, data));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(data + "/train.bin"));
}

}  // namespace
}  // namespace pipecoord::worker
