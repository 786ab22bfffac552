// JobData: the token datasets one job trains and validates on, opened the way both the
// coordinator (which checks them at submit, before any worker starts) and every worker (which
// reads them) open them, so the two can never disagree about what a spec means.
//
// A job names its data by `path` (the JobSpec's data.path, as the workers see it):
//   PREFIX       PREFIX.bin with PREFIX.json (flat) or PREFIX.idx (Megatron-LM)
//   FOLDER       a folder written by `pipectl data prepare`: FOLDER/train, and FOLDER/val when
//                present and no other validation is asked for
// Validation comes from one of: val_path (a second dataset), val_fraction (the tail of `path`,
// SplitTail), or a prepared folder's val.* . Training reads `path` (less the tail) in a
// shuffled order per epoch; validation reads the held-out range in order, the same batches at
// every evaluation, each replica its own (sequence_sampler.h).
#ifndef PIPECOORD_DATA_JOB_DATA_H_
#define PIPECOORD_DATA_JOB_DATA_H_

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "data/job_data_spec.h"
#include "data/sequence_sampler.h"
#include "data/token_dataset.h"

namespace pipecoord::data {


class JobData {
 public:
  // Errors are INVALID_ARGUMENT naming the file and the rule (a missing file, a token id >=
  // the model's vocabulary with its offset, a truncated file, a sidecar that disagrees with the
  // file's size, fewer tokens than one step's sequences), or the spec's field ("spec.data.format:
  // \"megatron\", but d/train is flat (d/train.json)").
  static Result<JobData> Open(const JobDataSpec& spec);

  const TokenDataset& train() const { return train_; }
  const SequenceSampler& train_sampler() const { return train_sampler_; }
  bool has_validation() const { return val_sampler_.has_value(); }
  // The dataset validation reads (train() itself for a tail split).
  const TokenDataset& validation() const { return val_ ? *val_ : train_; }
  // Where validation batches come from, for messages: "d/val.bin" or "d/train.bin (tail: ...)".
  const std::string& validation_source() const { return val_source_; }

  // Micro-batch `microbatch` of `replica` at `step` (its b sequences and their targets).
  Result<SequenceBatch> Train(int64_t step, int replica, int microbatch) const;
  // Validation micro-batch `batch` < eval_batches of `replica`; FAILED_PRECONDITION without one.
  Result<SequenceBatch> Validation(int replica, int batch) const;

 private:
  JobData(TokenDataset train, SequenceSampler sampler) : train_(std::move(train)), train_sampler_(std::move(sampler)) {}

  TokenDataset train_;
  SequenceSampler train_sampler_;
  std::optional<TokenDataset> val_;
  std::optional<SequenceSampler> val_sampler_;
  std::string val_source_;
};

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_JOB_DATA_H_
