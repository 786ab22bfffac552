// The optimizer a job runs, step by step, from its JobSpec (learningRate and spec.optimizer):
// AdamW's settings for optimizer step k (0-based, the k-th update of the job: a restart resumes
// it from the checkpoint's step count) and the clipping threshold. Pure; the CPU and CUDA
// backends and the PyTorch reference (tests/torch_reference/compare.py, which writes the same
// rules as a LambdaLR) all follow it.
//
// Learning rate at step k, lr = learningRate, W = warmupSteps, D = decaySteps (0: steps - W,
// at least 1), p = clamp((k - W) / D, 0, 1):
//   k < W          lr (k + 1) / W                       (linear warmup; never 0)
//   "constant"     lr
//   "cosine"       minLr + (lr - minLr) (1 + cos(pi p)) / 2
//   "linear"       lr - (lr - minLr) p
#ifndef PIPECOORD_JOBPLAN_OPTIMIZER_SCHEDULE_H_
#define PIPECOORD_JOBPLAN_OPTIMIZER_SCHEDULE_H_

#include <cstdint>

#include "common/status.h"
#include "proto/job.pb.h"

namespace pipecoord::jobplan {

struct OptimizerStepSettings {
  double lr = 0;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0;  // on matrices and embeddings; the backends leave norm gains out
  double clip_grad_norm = 0;  // > 0: clip to this global norm
};

// Step k's settings; `spec` has passed ValidateJobSpec.
OptimizerStepSettings OptimizerAt(const v1::JobSpec& spec, int64_t k);

// spec.optimizer's rules (INVALID_ARGUMENT naming the field): betas in [0, 1), eps > 0, weightDecay,
// minLr, clipGradNorm finite and >= 0, minLr <= learningRate, lrSchedule one of "", "constant",
// "cosine", "linear", warmupSteps and decaySteps in 0..10^9.
Status ValidateOptimizer(const v1::JobSpec& spec);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_OPTIMIZER_SCHEDULE_H_
