// TrainingData: where a rank's tokens come from. Without spec.data, the synthetic stream every
// rank regenerates from the job's data seed (model/synthetic_data.h, the default); with it, the
// job's token datasets (data/job_data.h), memory-mapped, each replica reading its own disjoint
// sequences. Either way a batch is a pure function of (seed, step, replica, micro-batch), so a
// run resumed from a checkpoint at step k reads exactly what an uninterrupted run read there:
// no data state goes into a checkpoint.
#ifndef PIPECOORD_WORKER_DAEMON_TRAINING_DATA_H_
#define PIPECOORD_WORKER_DAEMON_TRAINING_DATA_H_

#include <memory>
#include <optional>

#include "common/status.h"
#include "data/job_data.h"
#include "proto/job.pb.h"
#include "worker/model/synthetic_data.h"

namespace pipecoord::worker {

class TrainingData {
 public:
  // The data of `spec` (defaults applied) as replica `dp_rank` reads it. Opening a dataset
  // checks it again (the coordinator did at submit): a file changed since is refused with the
  // file and the rule.
  static Result<std::shared_ptr<const TrainingData>> Open(const v1::JobSpec& spec, int dp_rank);

  // Micro-batch `mb` (0..m-1) of this replica at `step`.
  Result<model::TokenBatch> Train(int64_t step, int mb) const;
  // Validation micro-batch `batch` (0..evalBatches-1) of this replica: the same tokens at every
  // evaluation. FAILED_PRECONDITION when the job has no validation split.
  Result<model::TokenBatch> Validation(int batch) const;
  bool from_dataset() const { return dataset_.has_value(); }

 private:
  TrainingData(int dp_rank, int microbatches) : dp_rank_(dp_rank), microbatches_(microbatches) {}

  int dp_rank_, microbatches_;
  std::optional<model::SyntheticData> synthetic_;
  std::optional<data::JobData> dataset_;
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_TRAINING_DATA_H_
