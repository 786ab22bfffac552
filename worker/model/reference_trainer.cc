#include "worker/model/reference_trainer.h"

#include <cmath>

#include <string>
#include <utility>

namespace pipecoord::model {

Result<std::unique_ptr<ReferenceTrainer>> ReferenceTrainer::Create(const ModelConfig& config,
                                                                   const TrainOptions& options) {
  if (!(options.data_noise >= 0.0 && options.data_noise <= 1.0)) {
    return InvalidArgument("data_noise: must be in [0, 1], got " +
                           std::to_string(options.data_noise));
  }
  auto model = StageModel::Create(config, WholeModel(config), options.batch);
  if (!model.ok()) return model.status();
  SyntheticData data(config.seed, config.vocab, config.seq_len, options.batch.micro_batch_size,
                     options.data_noise);
  return std::unique_ptr<ReferenceTrainer>(
      new ReferenceTrainer(std::move(model).value(), options, std::move(data)));
}

ReferenceTrainer::ReferenceTrainer(std::unique_ptr<StageModel> model, const TrainOptions& options,
                                   SyntheticData data)
    : model_(std::move(model)), options_(options), data_(std::move(data)) {}

Result<double> ReferenceTrainer::Step() {
  const int m = options_.batch.microbatches;
  model_->ZeroGrad();
  double total = 0;
  for (int mb = 0; mb < m; ++mb) {
    TokenBatch batch = data_.Batch(steps_done_, mb);
    auto out = model_->Forward(
        mb, StageInput{kernels::ToHostBuffer(batch.inputs), {}, kernels::ToHostBuffer(batch.targets)});
    if (!out.ok()) return out.status();
    total += *out->loss;
    auto dx = model_->BackwardFull(mb, {});
    if (!dx.ok()) return dx.status();
  }
  const double norm = std::sqrt(model_->GradientSquareSum(true));
  grad_norms_.push_back(norm);
  if (options_.clip_grad_norm > 0) {
    const float coef = static_cast<float>(options_.clip_grad_norm / (norm + 1e-6));
    if (coef < 1.0f) model_->ScaleGradients(coef);
  }
  const kernels::cpu::AdamWOptions adamw = options_.adamw_at ? options_.adamw_at(steps_done_) : options_.adamw;
  learning_rates_.push_back(adamw.lr);
  PIPECOORD_RETURN_IF_ERROR(model_->OptimizerStep(adamw));
  ++steps_done_;
  return total / m;
}

Result<std::vector<double>> ReferenceTrainer::Train(int steps) {
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    auto loss = Step();
    if (!loss.ok()) return loss.status();
    losses.push_back(*loss);
  }
  return losses;
}

}  // namespace pipecoord::model
