// ComputeBackend: what a worker's executor asks of the hardware for the stages its rank holds.
// The CPU backend (the reference model) and the CUDA backend implement it. Activations and
// gradients pass as tensors (kernels/tensor.h) in the backend's own memory: host for the CPU
// backend, the device for the CUDA one, so they go from kernel to transport without a copy.
#ifndef PIPECOORD_WORKER_DAEMON_COMPUTE_BACKEND_H_
#define PIPECOORD_WORKER_DAEMON_COMPUTE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/tensor.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/transport/transport.h"

namespace pipecoord::worker {

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  // What passes between two stages, forward (activations) and backward (their gradients):
  // the spec a receiver expects from its pipeline neighbour.
  virtual kernels::TensorSpec BoundarySpec() const = 0;

  // The transport boundary tensors travel by, built over `host` (the rank's connected TCP
  // transport, which carries host tensors). Null, the default: `host` itself. A device backend
  // returns one that carries its tensors and says in `how` which path it took and why (the
  // worker logs it).
  virtual std::unique_ptr<Transport> BoundaryTransport(Transport& /*host*/, std::string* /*how*/) {
    return nullptr;
  }

  // F of (stage, mb) at `step`. `input` is the previous stage's output (empty for the first
  // stage, which reads its tokens itself). Returns the activations for the next stage (empty
  // for the last stage, which computes the loss instead).
  virtual Result<kernels::Tensor> Forward(int stage, int mb, int step, kernels::Tensor input) = 0;
  // B: input gradient of (stage, mb) from `grad_output` (empty for the last stage, which
  // starts from its loss). Returns the gradient for the previous stage (empty for stage 0).
  virtual Result<kernels::Tensor> BackwardInput(int stage, int mb, kernels::Tensor grad_output) = 0;
  // W: the weight gradients of (stage, mb), accumulated; frees what B kept for it.
  virtual Status BackwardWeight(int stage, int mb) = 0;
  // BW: B then W.
  virtual Result<kernels::Tensor> BackwardFull(int stage, int mb, kernels::Tensor grad_output) = 0;
  // Every gradient buffer of every stage held, for the data-parallel all-reduce.
  virtual std::vector<std::span<float>> Gradients() = 0;
  // The optimizer step after all micro-batches (and the all-reduce), then gradients are zeroed.
  virtual Status OptimizerStep(int step) = 0;
  // Mean loss over this step's micro-batches; false if this rank holds no loss.
  virtual bool StepLoss(double* loss) = 0;
  virtual uint64_t memory_in_use_bytes() const = 0;
  virtual uint64_t memory_peak_bytes() const = 0;
  // What the backend holds from the system, in use or cached (a caching allocator's reserved
  // bytes); a backend without a cache holds what it uses.
  virtual uint64_t memory_reserved_bytes() const { return memory_in_use_bytes(); }
  // Starts a new peak window (at each step).
  virtual void ResetPeak() = 0;

  // What a checkpoint saves and restores at a step boundary: every tensor of every stage held
  // (weights and optimizer moments) as named host views, and the optimizer's step count.
  virtual std::vector<StateTensor> CheckpointState() = 0;
  virtual int64_t optimizer_steps() const = 0;
  virtual void set_optimizer_steps(int64_t steps) = 0;
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_COMPUTE_BACKEND_H_
