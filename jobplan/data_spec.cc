#include "jobplan/data_spec.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace pipecoord::jobplan {

data::JobDataSpec JobDataSpecOf(const v1::JobSpec& spec) {
  data::JobDataSpec d;
  d.path = spec.data().path();
  d.format = spec.data().format();
  d.val_path = spec.data().val_path();
  d.val_fraction = spec.data().val_fraction();
  d.vocab_size = spec.model().vocab();
  d.sampling.seed = spec.data_seed() != 0 ? spec.data_seed() : spec.model().seed();
  d.sampling.seq_len = spec.model().seq_len();
  d.sampling.micro_batch_size = spec.micro_batch_size();
  d.sampling.microbatches = spec.microbatches();
  d.sampling.dp = std::max(1, spec.dp());
  d.eval_batches = spec.eval_every() > 0 ? std::max(1, spec.eval_batches()) : 0;
  return d;
}

Status ValidateDataSpec(const v1::JobSpec& s) {
  if (s.eval_every() < 0 || s.eval_every() > 10'000'000) {
    return InvalidArgument("spec.evalEvery: must be in 0..10000000, got " + std::to_string(s.eval_every()));
  }
  if (s.eval_batches() < 0 || s.eval_batches() > 65536) {
    return InvalidArgument("spec.evalBatches: must be in 0..65536, got " + std::to_string(s.eval_batches()));
  }
  if (s.eval_batches() > 0 && s.eval_every() == 0) {
    return InvalidArgument("spec.evalBatches: only with spec.evalEvery > 0 (validation runs every evalEvery steps), got " +
                           std::to_string(s.eval_batches()));
  }
  if (!s.has_data()) {
    if (s.eval_every() > 0) {
      return InvalidArgument("spec.evalEvery: needs spec.data (validation reads a dataset's held-out split), got " +
                             std::to_string(s.eval_every()));
    }
    return Status::Ok();
  }
  PIPECOORD_RETURN_IF_ERROR(data::ValidateJobDataFields(JobDataSpecOf(s)));
  return Status::Ok();
}

bool EvaluatesAfter(const v1::JobSpec& spec, int step) {
  if (spec.eval_every() <= 0) return false;
  return (step + 1) % spec.eval_every() == 0 || step + 1 == spec.steps();
}

bool ByteLevel(const v1::JobSpec& spec) { return spec.has_data() && spec.model().vocab() == 256; }

double BitsPerByte(double loss_nats) { return loss_nats / std::log(2.0); }

}  // namespace pipecoord::jobplan
