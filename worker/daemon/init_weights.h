// spec.init on a worker: the job's first attempt starts from safetensors weights with Hugging
// Face names instead of the seed's (a restart resumes its own checkpoint instead).
#ifndef PIPECOORD_WORKER_DAEMON_INIT_WEIGHTS_H_
#define PIPECOORD_WORKER_DAEMON_INIT_WEIGHTS_H_

#include "common/status.h"
#include "proto/worker.pb.h"
#include "worker/daemon/compute_backend.h"

namespace pipecoord::worker {

// Opens spec.init (memory-mapped; every tensor's name, shape and dtype checked against the
// model first, data/hf_llama_weights.h) and copies the weights of the stages this rank holds
// into the backend's CheckpointState views ("stageK/NAME/value"), q/k rows in our rotary order;
// AdamW's moments and step count stay 0. Only the pages of this rank's tensors are read. With
// tp > 1 each tensor's slice of this rank (worker/model/weight_init.h's split).
// Errors say "spec.init: " and name the file and tensor.
Status LoadInitialWeights(const v1::Assignment& assignment, ComputeBackend* backend);

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_INIT_WEIGHTS_H_
