// spec.data, spec.evalEvery, spec.evalBatches: their rules at submit (through ValidateJobSpec)
// and the sampling a spec gives the datasets.
#include "jobplan/data_spec.h"

#include <gtest/gtest.h>

#include <string>

#include "jobplan/spec_validation.h"
#include "jobplan/tiny_spec_for_tests.h"

namespace pipecoord::jobplan {
namespace {

v1::JobSpec WithData(const std::string& path = "/data/text") {
  v1::JobSpec s = TinySpec();
  s.mutable_data()->set_path(path);
  return s;
}

std::string Error(const v1::JobSpec& s) {
  Status st = ValidateJobSpec(s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.message();
  return st.message();
}

TEST(DataSpec, SamplingFollowsTheSpec) {
  v1::JobSpec s = WithData();
  s.set_dp(3);
  s.set_eval_every(5);
  s.mutable_data()->set_val_fraction(0.1);
  s.mutable_data()->set_format("flat");
  data::JobDataSpec d = JobDataSpecOf(s);
  EXPECT_EQ(d.path, "/data/text");
  EXPECT_EQ(d.format, "flat");
  EXPECT_EQ(d.val_fraction, 0.1);
  EXPECT_EQ(d.vocab_size, 64);
  EXPECT_EQ(d.sampling.seed, 1u);  // data_seed 0: the model's seed
  EXPECT_EQ(d.sampling.seq_len, 8);
  EXPECT_EQ(d.sampling.micro_batch_size, 2);
  EXPECT_EQ(d.sampling.microbatches, 4);
  EXPECT_EQ(d.sampling.dp, 3);
  EXPECT_EQ(d.eval_batches, 1);  // evalBatches 0: one
  s.set_eval_batches(6);
  s.set_data_seed(99);
  EXPECT_EQ(JobDataSpecOf(s).eval_batches, 6);
  EXPECT_EQ(JobDataSpecOf(s).sampling.seed, 99u);
  s.set_eval_every(0);
  EXPECT_EQ(JobDataSpecOf(s).eval_batches, 0);  // no validation asked for
}

TEST(DataSpec, EvaluatesEveryNthStepAndTheLast) {
  v1::JobSpec s = WithData();
  s.set_steps(10);
  s.set_eval_every(4);
  std::string at;
  for (int step = 0; step < 10; ++step) at += EvaluatesAfter(s, step) ? std::to_string(step) + " " : "";
  EXPECT_EQ(at, "3 7 9 ");
  s.set_eval_every(0);
  EXPECT_FALSE(EvaluatesAfter(s, 9));
}

TEST(DataSpec, ValidSpecsPass) {
  EXPECT_TRUE(ValidateJobSpec(WithData()).ok());
  v1::JobSpec s = WithData();
  s.set_eval_every(10);
  s.set_eval_batches(4);
  s.mutable_data()->set_val_path("/data/val");
  EXPECT_TRUE(ValidateJobSpec(s).ok()) << ValidateJobSpec(s).message();
}

TEST(DataSpec, EachRuleNamesItsField) {
  v1::JobSpec s = WithData("");
  EXPECT_EQ(Error(s), "spec.data.path: required (a dataset PREFIX or a prepared folder)");
  s = WithData();
  s.mutable_data()->set_format("parquet");
  EXPECT_EQ(Error(s), "spec.data.format: must be \"flat\", \"megatron\" or empty, got \"parquet\"");
  s = WithData();
  s.mutable_data()->set_val_fraction(1.5);
  EXPECT_EQ(Error(s), "spec.data.valFraction: must be in [0, 1), got 1.5");
  s = WithData();
  s.mutable_data()->set_val_fraction(0.1);
  s.mutable_data()->set_val_path("/data/val");
  EXPECT_EQ(Error(s), "spec.data.valPath: give valPath or valFraction, not both");
  s = TinySpec();
  s.set_eval_every(5);
  EXPECT_EQ(Error(s), "spec.evalEvery: needs spec.data (validation reads a dataset's held-out split), got 5");
  s = WithData();
  s.set_eval_every(-1);
  EXPECT_EQ(Error(s), "spec.evalEvery: must be in 0..10000000, got -1");
  s = WithData();
  s.set_eval_batches(3);
  EXPECT_EQ(Error(s), "spec.evalBatches: only with spec.evalEvery > 0 (validation runs every evalEvery steps), got 3");
  s.set_eval_every(1);
  s.set_eval_batches(70000);
  EXPECT_EQ(Error(s), "spec.evalBatches: must be in 0..65536, got 70000");
  s = WithData();
  s.set_device("cuda");
  EXPECT_TRUE(ValidateJobSpec(s).ok()) << ValidateJobSpec(s).message();  // cuda trains on datasets too
  s.set_eval_every(4);
  EXPECT_TRUE(ValidateJobSpec(s).ok()) << ValidateJobSpec(s).message();  // and validates on them
}

}  // namespace
}  // namespace pipecoord::jobplan
