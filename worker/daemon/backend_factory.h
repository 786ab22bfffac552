// Builds the compute backend an assignment asks for (spec.device: "cpu" or "cuda").
#ifndef PIPECOORD_WORKER_DAEMON_BACKEND_FACTORY_H_
#define PIPECOORD_WORKER_DAEMON_BACKEND_FACTORY_H_

#include <memory>

#include "common/status.h"
#include "proto/worker.pb.h"
#include "worker/daemon/compute_backend.h"
#include "worker/parallel/tensor_parallel.h"

namespace pipecoord::worker {

// The CPU reference backend for the assignment's shards (weights from the model's seed, data
// for this data-parallel replica), or the CUDA backend for "cuda" (UNAVAILABLE when no device
// can be used). tp: the rank's tensor-parallel group when spec.tp > 1, which must outlive the
// backend; null for tp 1.
Result<std::unique_ptr<ComputeBackend>> MakeBackend(const v1::Assignment& assignment,
                                                    parallel::TensorParallel* tp = nullptr);

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_BACKEND_FACTORY_H_
