// ReferenceTrainer: the single-process run every pipelined run is checked against. One
// StageModel holds the whole model; each step runs its m micro-batches in order (F, then BW)
// with gradient accumulation, then the global gradient norm, clipping (if asked) and one AdamW
// step, on SyntheticData from the model's seed.
#ifndef PIPECOORD_WORKER_MODEL_REFERENCE_TRAINER_H_
#define PIPECOORD_WORKER_MODEL_REFERENCE_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/status.h"
#include "kernels/cpu/adamw.h"
#include "worker/model/model_config.h"
#include "worker/model/stage_model.h"
#include "worker/model/synthetic_data.h"

namespace pipecoord::model {

struct TrainOptions {
  BatchShape batch;                  // b and m
  kernels::cpu::AdamWOptions adamw;  // constant learning rate, unless adamw_at is set
  // AdamW's settings for optimizer step k (0-based), e.g. a learning-rate schedule; null: adamw.
  std::function<kernels::cpu::AdamWOptions(int64_t k)> adamw_at;
  // > 0: gradients scaled by min(1, clip / (norm + 1e-6)) before each step (clip_grad_norm_).
  double clip_grad_norm = 0;
  double data_noise = 0.1;           // SyntheticData's noise
};

class ReferenceTrainer {
 public:
  static Result<std::unique_ptr<ReferenceTrainer>> Create(const ModelConfig& config,
                                                          const TrainOptions& options);

  // Runs step number steps_done(): ZeroGrad; for mb = 0..m-1, Forward then BackwardFull on
  // data.Batch(step, mb); OptimizerStep. Returns the step loss: the micro-batch losses summed
  // in micro-batch order, divided by m.
  Result<double> Step();
  // Runs `steps` more steps; returns their losses.
  Result<std::vector<double>> Train(int steps);

  int64_t steps_done() const { return steps_done_; }
  // Each step's global gradient norm before clipping, and its learning rate.
  const std::vector<double>& grad_norms() const { return grad_norms_; }
  const std::vector<double>& learning_rates() const { return learning_rates_; }
  StageModel& model() { return *model_; }
  const SyntheticData& data() const { return data_; }

 private:
  ReferenceTrainer(std::unique_ptr<StageModel> model, const TrainOptions& options,
                   SyntheticData data);

  std::unique_ptr<StageModel> model_;
  TrainOptions options_;
  SyntheticData data_;
  int64_t steps_done_ = 0;
  std::vector<double> grad_norms_, learning_rates_;
};

}  // namespace pipecoord::model

#endif  // PIPECOORD_WORKER_MODEL_REFERENCE_TRAINER_H_
