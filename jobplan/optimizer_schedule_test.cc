// Each step's learning rate against the schedules' closed forms at points where they have exact
// values (warmup's (k+1)/W, cosine's half-way point and ends, linear's), the AdamW settings a spec
// gives, and the rules ValidateJobSpec enforces on spec.optimizer.
#include "jobplan/optimizer_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "jobplan/spec_validation.h"
#include "jobplan/tiny_spec_for_tests.h"

namespace pipecoord::jobplan {
namespace {

v1::JobSpec Spec(const std::string& schedule, int warmup, double min_lr, int decay = 0) {
  v1::JobSpec s = TinySpec();
  s.set_steps(12);
  s.set_learning_rate(0.01);
  s.mutable_optimizer()->set_lr_schedule(schedule);
  s.mutable_optimizer()->set_warmup_steps(warmup);
  s.mutable_optimizer()->set_min_lr(min_lr);
  s.mutable_optimizer()->set_decay_steps(decay);
  return s;
}

TEST(OptimizerScheduleTest, DefaultsAreConstantAdamW) {
  v1::JobSpec s = TinySpec();
  s.set_learning_rate(0.003);
  for (int k : {0, 1, 1000}) {
    const OptimizerStepSettings o = OptimizerAt(s, k);
    EXPECT_EQ(o.lr, 0.003);
    EXPECT_EQ(o.beta1, 0.9);
    EXPECT_EQ(o.beta2, 0.95);
    EXPECT_EQ(o.eps, 1e-8);
    EXPECT_EQ(o.weight_decay, 0.0);
    EXPECT_EQ(o.clip_grad_norm, 0.0);
  }
  s.mutable_optimizer()->set_beta1(0.0);  // set to 0: kept (presence, not value, decides)
  s.mutable_optimizer()->set_eps(1e-6);
  EXPECT_EQ(OptimizerAt(s, 0).beta1, 0.0);
  EXPECT_EQ(OptimizerAt(s, 0).eps, 1e-6);
}

TEST(OptimizerScheduleTest, WarmupThenCosine) {
  const v1::JobSpec s = Spec("cosine", 4, 0.001);  // D = 12 - 4 = 8
  EXPECT_DOUBLE_EQ(OptimizerAt(s, 0).lr, 0.0025);  // 0.01 x 1/4
  EXPECT_DOUBLE_EQ(OptimizerAt(s, 3).lr, 0.01);    // the last warmup step reaches the peak
  EXPECT_DOUBLE_EQ(OptimizerAt(s, 4).lr, 0.01);    // cos(0) = 1
  EXPECT_DOUBLE_EQ(OptimizerAt(s, 8).lr, 0.0055);  // half-way: (lr + min) / 2
  EXPECT_DOUBLE_EQ(OptimizerAt(s, 12).lr, 0.001);  // the end, and after it
  EXPECT_DOUBLE_EQ(OptimizerAt(s, 40).lr, 0.001);
  for (int k = 5; k < 12; ++k) EXPECT_LT(OptimizerAt(s, k).lr, OptimizerAt(s, k - 1).lr) << k;
}

TEST(OptimizerScheduleTest, LinearWithItsOwnDecaySteps) {
  const v1::JobSpec s = Spec("linear", 0, 0.002, 4);
  EXPECT_DOUBLE_EQ(OptimizerAt(s, 0).lr, 0.01);
  EXPECT_DOUBLE_EQ(OptimizerAt(s, 1).lr, 0.008);
  EXPECT_DOUBLE_EQ(OptimizerAt(s, 2).lr, 0.006);
  EXPECT_DOUBLE_EQ(OptimizerAt(s, 4).lr, 0.002);
  EXPECT_DOUBLE_EQ(OptimizerAt(s, 9).lr, 0.002);
  EXPECT_DOUBLE_EQ(OptimizerAt(Spec("constant", 2, 0), 0).lr, 0.005);  // warmup before a constant
  EXPECT_DOUBLE_EQ(OptimizerAt(Spec("constant", 2, 0), 7).lr, 0.01);
}

std::string Error(const v1::JobSpec& s) { return ValidateJobSpec(s).message(); }

TEST(OptimizerScheduleTest, RulesNameTheField) {
  EXPECT_EQ(Error(Spec("cosine", 2, 0.001)), "");
  v1::JobSpec s = Spec("cosine", 2, 0.001);
  s.mutable_optimizer()->set_beta1(1.0);
  EXPECT_EQ(Error(s), "spec.optimizer.beta1: must be in [0, 1), got 1");
  s.mutable_optimizer()->set_beta1(0.9);
  s.mutable_optimizer()->set_beta2(-0.1);
  EXPECT_EQ(Error(s), "spec.optimizer.beta2: must be in [0, 1), got -0.1");
  s.mutable_optimizer()->clear_beta2();
  s.mutable_optimizer()->set_eps(0);
  EXPECT_EQ(Error(s), "spec.optimizer.eps: must be a finite number > 0, got 0");
  s.mutable_optimizer()->clear_eps();
  s.mutable_optimizer()->set_weight_decay(-1);
  EXPECT_EQ(Error(s), "spec.optimizer.weightDecay: must be a finite number >= 0, got -1");
  s.mutable_optimizer()->set_weight_decay(0.1);
  s.mutable_optimizer()->set_clip_grad_norm(std::nan(""));
  EXPECT_EQ(Error(s), "spec.optimizer.clipGradNorm: must be a finite number >= 0, got nan");
  s.mutable_optimizer()->set_clip_grad_norm(1);
  s.mutable_optimizer()->set_lr_schedule("step");
  EXPECT_EQ(Error(s), "spec.optimizer.lrSchedule: must be \"constant\", \"cosine\" or \"linear\", got \"step\"");
  s.mutable_optimizer()->set_lr_schedule("linear");
  s.mutable_optimizer()->set_min_lr(0.02);
  EXPECT_EQ(Error(s), "spec.optimizer.minLr: must be <= spec.learningRate (0.01), got 0.02");
  s.mutable_optimizer()->set_min_lr(0);
  s.mutable_optimizer()->set_warmup_steps(-1);
  EXPECT_EQ(Error(s), "spec.optimizer.warmupSteps: must be in 0..1000000000, got -1");
  s.mutable_optimizer()->set_warmup_steps(0);
  EXPECT_EQ(Error(s), "");
  s.set_device("cuda");
  EXPECT_EQ(Error(s), "");  // the CUDA backend clips on the device
  s.set_device("cpu");
  s.mutable_worker()->set_kind("torch");
  s.mutable_worker()->set_module("m:f");
  EXPECT_EQ(Error(s), "");  // torch workers run it too (python/pipecoord/optimizer_schedule.py)
}

}  // namespace
}  // namespace pipecoord::jobplan
