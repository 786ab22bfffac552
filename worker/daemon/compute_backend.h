// ComputeBackend: what a worker's executor asks of the hardware for the stages its rank holds.
// The CPU backend (the reference model) and the CUDA backend implement it. Activations and
// gradients pass as tensors (kernels/tensor.h) in the backend's own memory: host for the CPU
// backend, the device for the CUDA one, so they go from kernel to transport without a copy.
#ifndef PIPECOORD_WORKER_DAEMON_COMPUTE_BACKEND_H_
#define PIPECOORD_WORKER_DAEMON_COMPUTE_BACKEND_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "jobplan/optimizer_schedule.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/known_answer_gemm.h"
#include "kernels/cpu/linear.h"
#include "kernels/tensor.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/parallel/collectives.h"
#include "worker/transport/rendezvous.h"
#include "worker/transport/transport.h"

namespace pipecoord::worker {

// One timed bracket of device work, on the executor's clock (see ComputeBackend's device timing).
struct DeviceSpan {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t recompute_ns = 0;  // the device time of the action's activation recompute, inside it
};

// What a device backend needs to choose the transport its tensors travel by, the same way on
// every rank of the job (worker/transport/transport_choice.h): filled by RankRun from the
// assignment once the rank's TCP links are up.
struct BoundaryTransportContext {
  int rank = -1;   // this rank's global rank (jobplan/layout.h)
  int world = 0;   // the job's ranks are 0 .. world - 1
  // The global ranks this rank exchanges device tensors with: its pipeline neighbours on other
  // ranks and, with dp > 1, its all-reduce ring neighbours.
  std::vector<int> peers;
  uint64_t session = 0;  // the job's session: rendezvous keys of an older attempt never match
  // The job's rendezvous; empty when there is none (a backend then takes a path that needs none).
  RendezvousFn rendezvous;
  // Bounds the exchange with the other ranks and the connection of the chosen transport.
  std::chrono::milliseconds timeout{30000};
};

// AdamW's settings for a backend's optimizer step after `steps_taken` steps (its optimizer_steps():
// restored from a checkpoint, so a restarted job resumes its schedule), from the job's spec.
inline kernels::cpu::AdamWOptions AdamWOptionsAt(const v1::JobSpec& spec, int64_t steps_taken) {
  const jobplan::OptimizerStepSettings s = jobplan::OptimizerAt(spec, steps_taken);
  kernels::cpu::AdamWOptions o;
  o.lr = s.lr;
  o.beta1 = s.beta1;
  o.beta2 = s.beta2;
  o.eps = s.eps;
  o.weight_decay = s.weight_decay;
  return o;
}

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  // What passes between two stages, forward (activations) and backward (their gradients):
  // the spec a receiver expects from its pipeline neighbour.
  virtual kernels::TensorSpec BoundarySpec() const = 0;

  // The transport boundary tensors (and device all-reduce chunks) travel by, built over `host`
  // (the rank's connected TCP transport, which carries host tensors). Null, the default: `host`
  // itself. A device backend returns one that carries its tensors, chosen with the other ranks
  // through `context` (every rank of the job must call it: the choice is a collective), and says
  // in `how` which path it took and why (the worker logs it). An error fails the rank: once the
  // ranks agreed, no rank can fall back alone.
  virtual Result<std::unique_ptr<Transport>> BoundaryTransport(Transport& /*host*/,
                                                               const BoundaryTransportContext& /*context*/,
                                                               std::string* /*how*/) {
    return std::unique_ptr<Transport>();
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
  // Every gradient buffer of every stage held, for the data-parallel all-reduce (host memory).
  virtual std::vector<std::span<float>> Gradients() = 0;
  // A backend whose gradients live on a device returns them here instead: every f32 gradient of
  // every stage held as one buffer (the same order on every replica), which the executor's OPT
  // sums over the replicas with parallel::AllReduceSum (worker/parallel/collectives.h) and scales to their mean, on the device, over
  // the boundary transport. Null, the default: the gradients are Gradients()'s host spans. Owned
  // by the backend, valid while it lives; the gradients it reaches are zeroed by OptimizerStep.
  virtual parallel::FloatBuffer* DeviceGradients() { return nullptr; }
  // The gradient buffers of one stage held (host memory), in Gradients()'s order: what its
  // REDUCE_GRAD all-reduces, on a background thread while the executor runs other stages' actions
  // (so the backend must not touch them until OptimizerStep). UNIMPLEMENTED by default: a
  // backend without it runs jobs whose gradients are reduced after the step only.
  virtual Result<std::vector<std::span<float>>> StageGradients(int stage) {
    return Unimplemented("stage " + std::to_string(stage) +
                         ": this backend does not give one stage's gradients (REDUCE_GRAD); its gradients are "
                         "all-reduced at OPT");
  }
  // Tied embeddings (spec.model.tiedEmbeddings): the gradient of the token embedding (stage 0) or
  // of the LM head's copy of it (the last stage, when it is another stage), which the executor
  // sums over the embedding group after the data-parallel reduction. UNIMPLEMENTED by default (a
  // backend that runs untied models only; spec validation refuses tied ones on it).
  virtual Result<std::span<float>> TiedEmbeddingGradient(int stage) {
    return Unimplemented("stage " + std::to_string(stage) + ": this backend keeps the LM head untied");
  }
  // The parameter values of one stage held (host memory), in StageGradients()'s order: what ZeRO's
  // all-gather fills after OptimizerStep updated this replica's shard. UNIMPLEMENTED by default.
  virtual Result<std::vector<std::span<float>>> StageValues(int stage) {
    return Unimplemented("stage " + std::to_string(stage) + ": this backend does not give one stage's values (ZeRO)");
  }
  // Device-resident twins of StageGradients and StageValues, for ZeRO on a backend whose tensors
  // live on a device (the CUDA one): the stage's f32 gradients or fp32 master values as one
  // buffer in the same order, which the executor reduce-scatters and all-gathers on the device.
  // Null (the default): the backend gives host spans. Owned by the backend, valid while it lives.
  virtual parallel::FloatBuffer* DeviceStageGradients(int /*stage*/) { return nullptr; }
  virtual parallel::FloatBuffer* DeviceStageValues(int /*stage*/) { return nullptr; }
  // The device-resident twin of TiedEmbeddingGradient (the CUDA backend's), which the executor
  // prefers; null (the default): the host span.
  virtual parallel::FloatBuffer* DeviceTiedEmbeddingGradient(int /*stage*/) { return nullptr; }
  // After ZeRO's all-gather of every stage's values: what the backend derives from them (the CUDA
  // backend's bf16 compute copies). OK by default (nothing to do).
  virtual Status ParametersGathered() { return Status::Ok(); }
  // True when a load (a checkpoint or spec.init) wrote only what this replica's ZeRO shard holds
  // (the CUDA backend's sharded bf16 masters), so the values the kernels read need ZeRO's
  // all-gather (then ParametersGathered) before the next forward: the executor runs it before
  // its first step. False by default.
  virtual bool ValuesNeedGather() const { return false; }
  // After the data-parallel reduction, before the norm and the optimizer step: the backend's own
  // gradient synchronisation (sequence parallelism's norm-gain gradients summed over the
  // tensor-parallel group). Every rank calls it at OPT; OK by default (nothing to do).
  virtual Status FinalizeGradients() { return Status::Ok(); }

  // Gradient clipping's inputs (spec.optimizer.clipGradNorm, and the norm every step reports):
  // the sum of squares, in double, of the gradients OptimizerStep will apply (every element this
  // rank steps: all, or under ZeRO its shard), where a tensor replicated over the tensor-parallel
  // group (norm gains) counts only when `count_replicated` (the group's rank 0 passes true), so
  // the sum over the ranks counts every element of the model once. UNIMPLEMENTED by default.
  virtual Result<double> GradientSquareSum(bool /*count_replicated*/) {
    return Unimplemented("this backend does not compute its gradients' norm (the CPU backend does)");
  }
  // Multiplies those gradients by `factor` (clipping).
  virtual Status ScaleGradients(float /*factor*/) {
    return Unimplemented("this backend does not scale its gradients (the CPU backend does)");
  }
  // The optimizer step after all micro-batches (and the all-reduce), then gradients are zeroed.
  // Its settings: AdamWOptionsAt(spec, optimizer_steps()).
  // Under ZeRO (spec.zero >= 1, dp > 1) it updates this replica's shard of each stage only: the
  // elements whose gradients the reduce-scatter left averaged here.
  virtual Status OptimizerStep(int step) = 0;
  // Abandons the step in flight (in-place recovery runs it again): every micro-batch in flight
  // forgotten, gradients zero, the step's losses dropped; weights and optimizer state untouched.
  virtual Status AbortStep() { return Unimplemented("this backend does not abandon a step in place (the CPU one does)"); }
  // Mean loss over this step's micro-batches; false if this rank holds no loss.
  virtual bool StepLoss(double* loss) = 0;
  virtual uint64_t memory_in_use_bytes() const = 0;
  virtual uint64_t memory_peak_bytes() const = 0;
  // What the backend holds from the system, in use or cached (a caching allocator's reserved
  // bytes); a backend without a cache holds what it uses.
  virtual uint64_t memory_reserved_bytes() const { return memory_in_use_bytes(); }
  // Starts a new peak window (at each step).
  virtual void ResetPeak() = 0;
  // The oom fault: allocates `bytes` more through the backend's own allocator and holds them
  // (written, so resident) while the backend lives, so every memory figure above includes them
  // as measured. RESOURCE_EXHAUSTED when the allocator refuses.
  virtual Status HoldBytes(uint64_t /*bytes*/) {
    return Unimplemented("this backend cannot hold memory for the oom fault");
  }

  // What a checkpoint saves and restores at a step boundary: every tensor of every stage held
  // (weights and optimizer moments) as named host views, and the optimizer's step count.
  virtual std::vector<StateTensor> CheckpointState() = 0;
  virtual int64_t optimizer_steps() const = 0;
  virtual void set_optimizer_steps(int64_t steps) = 0;

  // Nanoseconds spent so far rebuilding what activation recompute dropped (inside B and BW);
  // 0 for a backend that does not recompute.
  virtual int64_t recompute_ns() const { return 0; }

  // ---- The numerical probe (every PROBE action) ----
  // y [m, n] = x [m, k] w [n, k]^T (kernels/cpu/known_answer_gemm.h's inputs: integers, so the
  // answer is exact whatever the summation order) through the GEMM this backend trains with, on
  // its own device and stream, honouring the `corrupt` fault (kernels/cpu/linear.h's switch).
  // The default is the CPU backend's: kernels::cpu::LinearForward (OpenBLAS).
  virtual Status ProbeGemm(const kernels::cpu::ProbeShape& shape, const std::vector<float>& x,
                           const std::vector<float>& w, std::vector<float>* y) {
    y->assign(static_cast<size_t>(shape.m * shape.n), 0.0f);
    kernels::cpu::LinearForward<float>(x.data(), w.data(), y->data(), kernels::cpu::LinearDims{shape.m, shape.k, shape.n});
    return Status::Ok();
  }

  // ---- The replay probe (a PROBE action naming a micro-batch) ----
  // F of (stage, mb) of `step` (the step now running), run again on the input it read (still held: the
  // plan puts the PROBE after that F and before its backward, jobplan/probe_placement.h) and the
  // same weights: both output checksums (HashFloats of the activations; the head stage: Mix64 of
  // its loss's bits). FAILED_PRECONDITION when that F did not run in this step or its input is
  // gone. With tp every rank of the group replays the same F together (collectives).
  // UNIMPLEMENTED by default (a backend without it runs its probes without replays).
  struct Replay {
    int stage = 0, microbatch = 0;
    uint64_t original = 0, replay = 0;
  };
  virtual Result<Replay> ReplayForward(int stage, int /*mb*/, int /*step*/) {
    return Unimplemented("stage " + std::to_string(stage) + ": this backend does not replay its forwards (the CPU one does)");
  }
  // The seeded replay (a PROBE naming micro-batch jobplan::kSeededReplay): F of `stage` on inputs
  // drawn from the job's probe seed for `step` and the stage (StageModel::SeededForward), the
  // same on every data-parallel replica; its output's checksum, as ReplayForward's.
  virtual Result<uint64_t> SeededForward(int stage, int /*step*/) {
    return Unimplemented("stage " + std::to_string(stage) + ": this backend does not run seeded forwards (the CPU one does)");
  }

  // ---- Validation (spec.evalEvery), between steps ----
  // F of validation micro-batch `batch` on `stage`: nothing kept for a backward, no weight or
  // gradient touched. `input` as for Forward; the head stage adds the batch's loss to the
  // pending validation loss and returns an empty tensor.
  virtual Result<kernels::Tensor> Evaluate(int /*stage*/, int /*batch*/, kernels::Tensor /*input*/) {
    return Unimplemented("validation: this backend does not evaluate (the CPU backend does)");
  }
  // The mean loss over the validation batches evaluated since the last call, then forgotten;
  // false if this rank holds no loss.
  virtual bool TakeValidationLoss(double* /*loss*/) { return false; }

  // ---- Device timing ----
  // A backend whose calls return once their work is queued (a GPU stream) answers true: the
  // host clock around such a call measures its launch, not its work, so the executor times the
  // work on the device instead. Per step, on the executor's thread:
  //   MarkBegin(i) before the first launch of the i-th timed action and MarkEnd(i) after its
  //   last (i = 0, 1, ... in the order the step runs them; the timed actions are F, B, W, BW and
  //   OPT); after the step's last action, ResolveMarks(n, clock_ns) once: the backend waits for
  //   its device and returns the n brackets, in order, as spans on `clock_ns` (the executor's
  //   clock). The next step numbers its marks from 0 again, so a backend can reuse what a mark
  //   costs it. Marks left by a step that failed are overwritten by the next step's.
  // The defaults are a synchronous backend's (the CPU one): no marks; the host times stand.
  virtual bool TimesOnDevice() const { return false; }
  virtual Status MarkBegin(int /*mark*/) { return Unimplemented("MarkBegin: this backend is timed by the host"); }
  virtual Status MarkEnd(int /*mark*/) { return Unimplemented("MarkEnd: this backend is timed by the host"); }
  // FAILED_PRECONDITION when a mark below `count` was not both begun and ended since the last
  // resolve; a device failure as the backend's error.
  virtual Result<std::vector<DeviceSpan>> ResolveMarks(int /*count*/,
                                                       const std::function<int64_t()>& /*clock_ns*/) {
    return Unimplemented("ResolveMarks: this backend is timed by the host");
  }
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_COMPUTE_BACKEND_H_
