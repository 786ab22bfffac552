#include "worker/daemon/training_data.h"

#include "jobplan/data_spec.h"
#include "worker/daemon/assignment_model.h"

namespace pipecoord::worker {
namespace {

model::TokenBatch ToTokenBatch(data::SequenceBatch b) { return {std::move(b.inputs), std::move(b.targets)}; }

}  // namespace

Result<std::shared_ptr<const TrainingData>> TrainingData::Open(const v1::JobSpec& spec, int dp_rank) {
  std::shared_ptr<TrainingData> d(new TrainingData(dp_rank, spec.microbatches()));
  if (!spec.has_data()) {
    d->synthetic_.emplace(SyntheticDataOf(spec));
    return std::shared_ptr<const TrainingData>(std::move(d));
  }
  auto opened = data::JobData::Open(jobplan::JobDataSpecOf(spec));
  if (!opened.ok()) return opened.status();
  d->dataset_.emplace(std::move(opened).value());
  return std::shared_ptr<const TrainingData>(std::move(d));
}

Result<model::TokenBatch> TrainingData::Train(int64_t step, int mb) const {
  // Replicas read disjoint micro-batches: replica d's mb is the step's d*m + mb.
  if (synthetic_) return synthetic_->Batch(step, dp_rank_ * microbatches_ + mb);
  auto b = dataset_->Train(step, dp_rank_, mb);
  if (!b.ok()) return b.status();
  return ToTokenBatch(std::move(b).value());
}

Result<model::TokenBatch> TrainingData::Validation(int batch) const {
  if (!dataset_) return FailedPrecondition("validation: the job trains on the synthetic stream (no spec.data)");
  auto b = dataset_->Validation(dp_rank_, batch);
  if (!b.ok()) return b.status();
  return ToTokenBatch(std::move(b).value());
}

}  // namespace pipecoord::worker
