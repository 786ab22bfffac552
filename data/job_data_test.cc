// JobData: a job's datasets opened as the coordinator and the workers open them; every rule a
// bad dataset breaks is refused with the file (or the spec's field) and the rule.
#include "data/job_data.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/byte_dataset_writer.h"
#include "data/test_files.h"

namespace pipecoord::data {
namespace {

using testing::FreshDir;
using testing::WriteBytes;

// A flat uint16 dataset PREFIX.bin + PREFIX.json holding `ids`; `sidecar_extra` adds keys.
void WriteFlat(const std::string& prefix, const std::vector<uint16_t>& ids, int vocab,
               const std::string& sidecar_extra = "") {
  std::string bin;
  for (uint16_t id : ids) {
    bin.push_back(static_cast<char>(id & 0xff));
    bin.push_back(static_cast<char>(id >> 8));
  }
  WriteBytes(prefix + ".bin", bin);
  WriteBytes(prefix + ".json", "{\"dtype\": \"uint16\", \"vocab_size\": " + std::to_string(vocab) + sidecar_extra + "}");
}

std::vector<uint16_t> Ramp(int n, int vocab) {
  std::vector<uint16_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<uint16_t>(i % vocab));
  return ids;
}

JobDataSpec Spec(const std::string& path, int eval_batches = 0) {
  JobDataSpec s;
  s.path = path;
  s.vocab_size = 256;
  s.sampling = {.seed = 7, .seq_len = 8, .micro_batch_size = 2, .microbatches = 2, .dp = 2};
  s.eval_batches = eval_batches;
  return s;
}

std::string Error(const JobDataSpec& spec) {
  auto d = JobData::Open(spec);
  EXPECT_FALSE(d.ok());
  if (d.ok()) return "";
  EXPECT_EQ(d.status().code(), Code::kInvalidArgument);
  return d.status().message();
}

TEST(JobData, PreparedFolderGivesTrainAndValidationSplits) {
  const std::string dir = FreshDir("prepared");
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the quick brown fox " + std::to_string(i) + "\n";
  WriteBytes(dir + "/in.txt", text);
  ByteDatasetOptions o;
  o.inputs = {dir + "/in.txt"};
  o.out_dir = dir + "/ds";
  o.val_fraction = 0.25;
  ASSERT_TRUE(WriteByteDataset(o).ok());
  auto d = JobData::Open(Spec(dir + "/ds", 3));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->train().bin_path(), dir + "/ds/train.bin");
  ASSERT_TRUE(d->has_validation());
  EXPECT_EQ(d->validation_source(), dir + "/ds/val.bin");
  // Training batches are the sampler's windows of the text, targets shifted by one.
  auto b = d->Train(5, 1, 1);
  ASSERT_TRUE(b.ok());
  auto starts = d->train_sampler().MicroBatchStarts(5, 1, 1);
  ASSERT_TRUE(starts.ok());
  for (size_t row = 0; row < starts->size(); ++row) {
    for (int t = 0; t < 8; ++t) {
      EXPECT_EQ(b->inputs[row * 8 + t], static_cast<unsigned char>(text[(*starts)[row] + t]));
      EXPECT_EQ(b->targets[row * 8 + t], static_cast<unsigned char>(text[(*starts)[row] + t + 1]));
    }
  }
  // Validation: the held-out tail in order; the two replicas read disjoint windows, and the
  // same ones at every evaluation.
  const size_t val_begin = text.size() - d->validation().tokens().size();
  for (int replica = 0; replica < 2; ++replica) {
    for (int k = 0; k < 3; ++k) {
      auto v = d->Validation(replica, k);
      ASSERT_TRUE(v.ok());
      auto again = d->Validation(replica, k);
      EXPECT_EQ(v->inputs, again->inputs);
      for (int row = 0; row < 2; ++row) {
        const size_t window = (static_cast<size_t>(replica) * 3 + k) * 2 + row;  // sequential order
        for (int t = 0; t < 8; ++t) {
          EXPECT_EQ(v->inputs[row * 8 + t], static_cast<unsigned char>(text[val_begin + window * 8 + t])) << window;
        }
      }
    }
  }
}

TEST(JobData, ValFractionHoldsOutTheTail) {
  const std::string dir = FreshDir("fraction");
  WriteFlat(dir + "/d", Ramp(1000, 256), 256);
  JobDataSpec spec = Spec(dir + "/d", 1);
  spec.val_fraction = 0.1;
  auto d = JobData::Open(spec);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->train_sampler().range(), (TokenRange{0, 900}));
  auto v = d->Validation(0, 0);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->inputs[0], 900 % 256);
  EXPECT_NE(d->validation_source().find("validation tail, valFraction 0.1, 100 tokens"), std::string::npos)
      << d->validation_source();
}

TEST(JobData, WithoutEvalNoValidationIsNeeded) {
  const std::string dir = FreshDir("noeval");
  WriteFlat(dir + "/d", Ramp(200, 256), 256);
  auto d = JobData::Open(Spec(dir + "/d"));
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_FALSE(d->has_validation());
  EXPECT_EQ(d->Validation(0, 0).status().code(), Code::kFailedPrecondition);
}

TEST(JobData, RefusesEachRuleNamingTheFile) {
  const std::string dir = FreshDir("refusals");
  // Missing.
  EXPECT_NE(Error(Spec(dir + "/none")).find(dir + "/none: no dataset"), std::string::npos);
  // The sidecar's vocabulary above the model's.
  WriteFlat(dir + "/big", Ramp(200, 256), 512);
  EXPECT_NE(Error(Spec(dir + "/big")).find(dir + "/big.json: vocab_size 512 is larger than the model's vocabulary (256)"),
            std::string::npos);
  // A token id >= the vocabulary, with its offset.
  std::vector<uint16_t> ids = Ramp(200, 100);
  ids[17] = 300;
  WriteFlat(dir + "/bad_id", ids, 256);
  EXPECT_NE(Error(Spec(dir + "/bad_id")).find(dir + "/bad_id.bin: token 300 at offset 17"), std::string::npos)
      << Error(Spec(dir + "/bad_id"));
  // A sidecar that disagrees with the file's size (a truncated .bin).
  WriteFlat(dir + "/short", Ramp(200, 256), 256, ", \"tokens\": 201");
  const std::string shortmsg = Error(Spec(dir + "/short"));
  EXPECT_NE(shortmsg.find(dir + "/short.bin"), std::string::npos) << shortmsg;
  EXPECT_NE(shortmsg.find("201"), std::string::npos) << shortmsg;
  // A partial token at the end.
  WriteFlat(dir + "/odd", Ramp(200, 256), 256);
  WriteBytes(dir + "/odd.bin", std::string(401, 'a'));
  EXPECT_NE(Error(Spec(dir + "/odd")).find(dir + "/odd.bin"), std::string::npos);
  // Too few tokens for one step: 8 sequences of 9 tokens need 65.
  WriteFlat(dir + "/tiny", Ramp(60, 256), 256);
  const std::string tiny = Error(Spec(dir + "/tiny"));
  EXPECT_NE(tiny.find(dir + "/tiny.bin: sampling: the range of 60 tokens holds 7 windows of 9 tokens, fewer than one "
                            "step's 8 sequences"),
            std::string::npos)
      << tiny;
  // The format named in the spec is not the file's.
  WriteFlat(dir + "/ok", Ramp(200, 256), 256);
  JobDataSpec wrong = Spec(dir + "/ok");
  wrong.format = "megatron";
  EXPECT_NE(Error(wrong).find("spec.data.format is \"megatron\", but " + dir + "/ok is flat (" + dir + "/ok.json)"),
            std::string::npos)
      << Error(wrong);
  wrong.format = "arrow";
  EXPECT_NE(Error(wrong).find("spec.data.format: must be \"flat\", \"megatron\" or empty"), std::string::npos);
  // Validation asked for, but no split to take it from.
  EXPECT_NE(Error(Spec(dir + "/ok", 1)).find("spec.evalEvery: validation needs a split"), std::string::npos);
  // A validation split too small for evalBatches.
  JobDataSpec frac = Spec(dir + "/ok", 4);
  frac.val_fraction = 0.1;  // 20 tokens: 2 windows, 2 replicas x 4 batches x 2 sequences needed
  EXPECT_NE(Error(frac).find(dir + "/ok.bin (validation tail, valFraction 0.1, 20 tokens), evalBatches 4: sampling:"),
            std::string::npos)
      << Error(frac);
  // Both ways to validate at once.
  frac.val_path = dir + "/ok";
  EXPECT_NE(Error(frac).find("spec.data.valPath: give valPath or valFraction, not both"), std::string::npos);
  JobDataSpec badval = Spec(dir + "/ok", 1);
  badval.val_path = dir + "/missing";
  EXPECT_NE(Error(badval).find(dir + "/missing: no dataset"), std::string::npos);
  JobDataSpec fr = Spec(dir + "/ok");
  fr.val_fraction = 1;
  EXPECT_NE(Error(fr).find("spec.data.valFraction: must be in [0, 1), got 1"), std::string::npos);
  EXPECT_NE(Error(Spec("")).find("spec.data.path: required"), std::string::npos);
}

}  // namespace
}  // namespace pipecoord::data
