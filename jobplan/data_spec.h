// A JobSpec's training data and validation settings (spec.data, spec.evalEvery,
// spec.evalBatches): the plain values data/ opens datasets with, and their rules on their own.
// Pure: opening and checking the files is data::JobData::Open's, which the coordinator runs at
// submit and every worker at its start.
#ifndef PIPECOORD_JOBPLAN_DATA_SPEC_H_
#define PIPECOORD_JOBPLAN_DATA_SPEC_H_

#include "common/status.h"
#include "data/job_data_spec.h"
#include "proto/job.pb.h"

namespace pipecoord::jobplan {

// The data and sampling of a planned spec (defaults applied, "auto" resolved): seed data_seed
// (0: model.seed), sequences of model.seqLen tokens, micro_batch_size x microbatches per
// replica, dp replicas; evalBatches (0: 1) validation micro-batches per replica when evalEvery > 0.
data::JobDataSpec JobDataSpecOf(const v1::JobSpec& spec);

// INVALID_ARGUMENT naming the field: spec.data's own rules (data::ValidateJobDataFields),
// spec.evalEvery in 0..10000000 and only with spec.data, spec.evalBatches in 0..65536 and only
// with spec.evalEvery > 0, spec.evalEvery only on device "cpu" (the CUDA backend trains on a
// dataset but does not evaluate, for now).
Status ValidateDataSpec(const v1::JobSpec& spec);

// Whether validation runs after `step` (0-based): every evalEvery-th step and the last one.
bool EvaluatesAfter(const v1::JobSpec& spec, int step);

// A job that trains on data with the byte-level vocabulary (spec.data set, model.vocab 256, as
// `pipectl data prepare` writes): its losses are also shown in bits per byte.
bool ByteLevel(const v1::JobSpec& spec);
// A per-token loss in nats as bits per byte, for byte-level data (one token = one byte): / ln 2.
double BitsPerByte(double loss_nats);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_DATA_SPEC_H_
