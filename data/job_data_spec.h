// What a JobSpec says about its training data, in plain values (data/ reads no protos:
// jobplan::JobDataSpecOf fills it from a spec), and the rules its fields follow on their own,
// before any file is opened: checked at submit by jobplan::ValidateJobSpec and again by
// JobData::Open (job_data.h), which then checks the files.
#ifndef PIPECOORD_DATA_JOB_DATA_SPEC_H_
#define PIPECOORD_DATA_JOB_DATA_SPEC_H_

#include <cstdint>
#include <string>

#include "common/status.h"
#include "data/sequence_sampler.h"

namespace pipecoord::data {

struct JobDataSpec {
  std::string path;          // a dataset PREFIX or a folder from `pipectl data prepare`
  std::string format;        // "flat", "megatron" or "" (told by the file beside PREFIX.bin)
  std::string val_path;      // empty: none
  double val_fraction = 0;   // in [0, 1)
  int64_t vocab_size = 0;    // the model's: every id must be below it
  SamplingSpec sampling;     // seed, sequence length, micro-batch size, micro-batches, dp
  int eval_batches = 0;      // > 0: validation is required, eval_batches micro-batches per replica
  bool check_tokens = true;  // scan every id at open
};

// INVALID_ARGUMENT naming the JobSpec field: spec.data.path required, spec.data.format one of
// "flat", "megatron", "", spec.data.valFraction in [0, 1), not both valPath and valFraction.
Status ValidateJobDataFields(const JobDataSpec& spec);

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_JOB_DATA_SPEC_H_
