// CudaBackend: the executor's ComputeBackend on one CUDA device: one CudaStageModel per virtual
// stage the rank holds, fed by the same tokens as the CPU backend (worker/daemon/training_data.h:
// the synthetic stream every rank regenerates from the job's data seed, or the job's datasets;
// each replica its own sequences). Validation (spec.evalEvery) runs each stage's F on the
// dataset's held-out batches through CudaStageModel::ForwardOnly (nothing kept, no weight
// touched); the head's batch losses are read back one by one and averaged.
//
// Device-resident: what passes between stages is a device tensor of BoundarySpec(); nothing on
// the data path is copied to the host except the step's loss (StepLoss). All work is queued on
// the CudaDevice's one compute stream (compute_stream()); a transport that reads a returned
// tensor on another stream must first wait for the work queued on this one. Those tensors
// travel by the transport the job's ranks choose together (BoundaryTransport): NCCL between
// ranks on distinct GPUs, staged through pinned host memory when two ranks that exchange
// tensors share one.
//
// Timed on the device (ComputeBackend's device timing): a mark is a pair of timing events
// recorded on the compute stream around an action's launches; ResolveMarks synchronises the
// stream once, records a reference event read against the executor's clock on both sides of
// its completion, and places every mark by cudaEventElapsedTime from it (CUDA's event clock has
// about 0.5 us resolution; a mark's offset from the reference is a float of milliseconds, about
// 2 us coarse 30 s back, while its duration is measured from its own begin; the reference's
// pairing error is half the few microseconds its record-and-wait takes). The events are created
// on first use, the only timing-enabled events of the backend, and reused every step.
//
// Activation recompute (spec.recompute): "full" as CudaStageModel::SetRecompute says; the rebuilt
// forwards are timed on the device inside their action's mark (DeviceSpan::recompute_ns, the
// action's recompute_ns). "selective" keeps what "none" keeps (flash attention).
//
// Differences from the CPU backend a caller must know:
// - ZeRO-1 (spec.zero >= 1, dp > 1): each stage keeps the AdamW moments of its replica's shard
//   only (CudaStageModel::ShardOptimizerStates); DeviceStageGradients / DeviceStageValues give the
//   executor the device buffers its reduce-scatter and all-gather run on. In fp32 the masters are
//   what the kernels read, so they stay whole and the all-gather runs over them. In bf16 the
//   masters are sharded too (Megatron's distributed optimizer): the all-gather runs over the
//   bf16 copies (each replica's shard rounded by its optimizer step; f32 on the wire, the same
//   bytes as the fp32 masters'), and the checkpoint holds the shard's masters as "value@B" (the
//   moments' naming: checkpoint.h reshards them, export joins them). A load (a checkpoint or
//   spec.init) rounds the shard's copies only, so ValuesNeedGather() asks the executor for the
//   all-gather before its first step. ZeRO-2 is the CPU backend's.
// - Gradients() returns nothing: the gradients live on the device. DeviceGradients() gives them
//   (every parameter's f32 gradient of every stage held, stages in order, parameters in model
//   order: the same on every replica) to the executor's data-parallel all-reduce, which sums
//   them on the device over the boundary transport (parallel::AllReduceSum, device_gradients.h).
// - CheckpointState() copies every tensor to host buffers the backend owns (the same names as
//   the CPU backend's, so checkpoints move between backends) and returns views of them. A
//   restore writes into those views and then calls set_optimizer_steps (checkpointing.cc's
//   order): set_optimizer_steps called while the views are current (no compute since
//   CheckpointState) uploads them to the device. A failure there, or in another call that
//   cannot return a Status, is returned by the next call that can.
#ifndef PIPECOORD_WORKER_CUDA_CUDA_BACKEND_H_
#define PIPECOORD_WORKER_CUDA_CUDA_BACKEND_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kernels/tensor.h"
#include "proto/worker.pb.h"
#include "worker/cuda/cuda_device.h"
#include "worker/cuda/cuda_stage_model.h"
#include "worker/cuda/device_gradients.h"
#include "worker/cuda/precision.h"
#include "worker/daemon/compute_backend.h"
#include "worker/daemon/training_data.h"
#include "worker/transport/nccl_wire.h"

namespace pipecoord::worker::cuda {

struct CudaBackendOptions {
  int device = 0;  // the CUDA device index (CUDA_VISIBLE_DEVICES picks which GPU that is)
  // Backends that share one device (tests running several ranks in one process) share its
  // stream and pool, so tensors pass between them in stream order. Null: the backend opens
  // `device` itself.
  std::shared_ptr<CudaDevice> shared_device;
  // The rank's tensor-parallel group when spec.tp > 1 (it must outlive the backend; every stage
  // of the rank shares it): CudaStageModel's tensor parallelism. Null for tp 1.
  parallel::TensorParallel* tensor_parallel = nullptr;
};

class CudaBackend final : public ComputeBackend {
 public:
  kernels::TensorSpec BoundarySpec() const override;
  // The job's choice (worker/transport/transport_choice.h), made with every other rank through
  // context.rendezvous: NcclTransport (connected to context.peers) when no two ranks that
  // exchange tensors share a GPU, else StagedTransport over `host` (pinned host memory over TCP);
  // staged without a rendezvous. On the host double: the same exchange and choice over stand-in
  // GPU identities (one per device index), and no transport (null: `host` carries its tensors).
  Result<std::unique_ptr<Transport>> BoundaryTransport(Transport& host, const BoundaryTransportContext& context,
                                                       std::string* how) override;
  Result<kernels::Tensor> Forward(int stage, int mb, int step, kernels::Tensor input) override;
  Result<kernels::Tensor> BackwardInput(int stage, int mb, kernels::Tensor grad_output) override;
  Status BackwardWeight(int stage, int mb) override;
  Result<kernels::Tensor> BackwardFull(int stage, int mb, kernels::Tensor grad_output) override;
  std::vector<std::span<float>> Gradients() override;  // empty: see above
  parallel::FloatBuffer* DeviceGradients() override;
  parallel::FloatBuffer* DeviceStageGradients(int stage) override;
  parallel::FloatBuffer* DeviceStageValues(int stage) override;
  // Tied embeddings: the stage's embedding gradient or its head copy's (CudaStageModel's
  // TiedEmbeddingGradient), null with the error deferred when the stage holds neither.
  parallel::FloatBuffer* DeviceTiedEmbeddingGradient(int stage) override;
  Status ParametersGathered() override;  // the bf16 copies from the gathered masters (fp32 masters)
  bool ValuesNeedGather() const override { return values_need_gather_; }
  // Sequence parallelism: the norm gains' gradients summed over the tensor-parallel group.
  Status FinalizeGradients() override;
  // In double on the device, stage by stage (each stage's tensors in model order), read back
  // once; under ZeRO the shard's elements only. Under tensor parallelism the replicated tensors
  // (norm gains) only with count_replicated (the executor asks one rank of the group).
  Result<double> GradientSquareSum(bool count_replicated) override;
  Status ScaleGradients(float factor) override;
  Status OptimizerStep(int step) override;
  bool StepLoss(double* loss) override;
  uint64_t memory_in_use_bytes() const override;    // the pool's allocated bytes
  uint64_t memory_peak_bytes() const override;      // their peak since ResetPeak
  uint64_t memory_reserved_bytes() const override;  // the pool's segments, in use or cached
  void ResetPeak() override;
  Status HoldBytes(uint64_t bytes) override;  // from the device's pool, zeroed on the stream
  // On the device through the GemmContext the stages train with: fp32 jobs its fp32 F GEMM; bf16
  // jobs its bf16 tensor-core W GEMM (bf16 inputs, fp32 output: the integers stay exact), on the
  // inputs transposed (W's dw [out, in] = dy^T x with dy = x^T, x = w^T). The inputs and output
  // come from the pool and go back before it returns (the budget's PROBE peak counts them).
  Status ProbeGemm(const kernels::cpu::ProbeShape& shape, const std::vector<float>& x, const std::vector<float>& w,
                   std::vector<float>* y) override;
  // The replay probe on the device. The F a PROBE of the rank's job list names is hashed as it
  // runs (kernels/cuda/checksum.h's HashFloats over its output's bytes read as floats; the head's:
  // over its micro-batch loss, one double), into a slot of a small device buffer held from the
  // start; the replay runs the F again on the input still held (the same tensor, no copy) and
  // the tokens and targets regenerated, hashes its output into the last slot, and reads both.
  // Nothing is copied to the host but the two hashes. Seeded: F on inputs drawn from the probe
  // seed (StageModel::SeededForward's recipe), its hash.
  Result<Replay> ReplayForward(int stage, int mb, int step) override;
  Result<uint64_t> SeededForward(int stage, int step) override;
  Result<kernels::Tensor> Evaluate(int stage, int batch, kernels::Tensor input) override;
  bool TakeValidationLoss(double* loss) override;
  std::vector<StateTensor> CheckpointState() override;
  int64_t optimizer_steps() const override;
  void set_optimizer_steps(int64_t steps) override;

  bool TimesOnDevice() const override { return true; }
  Status MarkBegin(int mark) override;
  Status MarkEnd(int mark) override;
  Result<std::vector<DeviceSpan>> ResolveMarks(int count, const std::function<int64_t()>& clock_ns) override;

  ~CudaBackend() override;  // destroys the timing events
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  cudaStream_t compute_stream() const { return device_->stream(); }
  CudaDevice& device() { return *device_; }
  Precision precision() const { return precision_; }
  // The stage's model; nullptr when this rank does not hold it.
  CudaStageModel* stage(int stage);

 private:
  friend Result<std::unique_ptr<CudaBackend>> MakeCudaBackend(const v1::Assignment&,
                                                              const CudaBackendOptions&);
  CudaBackend(const v1::Assignment& a, std::shared_ptr<const TrainingData> data, Precision precision,
              std::shared_ptr<CudaDevice> device);
  Result<CudaStageModel*> Find(int stage);
  // The GPU as NCCL tells GPUs apart (nccl_transport.h's LocalDeviceIdentity).
  Result<nccl_wire::DeviceIdentity> DeviceIdentity() const;
  Status Deferred();  // takes the error kept by a call that could not return it
  Status UploadCheckpointViews();
  // Records mark `mark`'s begin or end event on the compute stream, creating events up to it.
  Status RecordMark(int mark, bool begin);
  Result<cudaEvent_t> NewTimingEvent();
  Result<std::pair<cudaEvent_t, cudaEvent_t>> NewTimingEventPair();  // begin, end

  // Declared first, destroyed last: every tensor of the stages goes back to its pool first.
  std::shared_ptr<CudaDevice> device_;
  std::shared_ptr<const TrainingData> data_;  // the job's tokens (training_data.h)
  const Precision precision_;
  const int mbs_, dp_rank_, tp_rank_;
  const int64_t mbs_size_, seq_, hidden_;
  const v1::JobSpec spec_;  // its optimizer settings, step by step (AdamWOptionsAt)
  std::map<int, std::unique_ptr<CudaStageModel>> stages_;
  std::vector<kernels::Tensor> held_;  // HoldBytes (the oom fault)
  std::unique_ptr<DeviceTensorFloats> gradients_;  // DeviceGradients(), built on first use
  // DeviceStageGradients / DeviceStageValues (ZeRO), by stage, built on first use.
  std::map<int, std::unique_ptr<DeviceTensorFloats>> stage_gradients_, stage_values_;
  std::map<int, std::unique_ptr<DeviceTensorFloats>> tied_gradients_;  // DeviceTiedEmbeddingGradient, by stage
  bool has_loss_ = false;
  double val_loss_sum_ = 0;  // the head's validation losses since TakeValidationLoss
  int val_batches_ = 0;
  Status deferred_;
  // CheckpointState's host copies, in its order: (device tensor, host buffer).
  std::vector<std::pair<kernels::Tensor, std::vector<float>>> views_;
  bool views_current_ = false;  // no compute since CheckpointState filled them
  bool values_need_gather_ = false;  // a load rounded the shard's bf16 copies only (sharded masters)
  // Device timing: one pair of events per mark and the reference, created once, reused.
  struct TimingMark {
    cudaEvent_t begin = nullptr;
    cudaEvent_t end = nullptr;
    bool begun = false;  // recorded since the last ResolveMarks
    bool ended = false;
  };
  std::vector<TimingMark> marks_;
  cudaEvent_t reference_ = nullptr;
  // The replay probe: a hash slot per (stage, micro-batch) a PROBE replays, and the last slot
  // for the replay's own output; the Fs of this step that ran.
  std::map<std::pair<int, int>, int> replay_slot_;
  kernels::Tensor hashes_;  // u8 [8 (slots + 1)], empty when the job list replays nothing
  int forwards_step_ = -1;
  std::set<std::pair<int, int>> forwarded_;
  // Queues the hash of F's output (or of the head's loss) into slot `slot`.
  Status HashInto(const kernels::Tensor& out, const kernels::Tensor& loss, int slot);
  // Waits for the stream and reads slot `slot`.
  Result<uint64_t> ReadHash(int slot);
  // Activation recompute (spec.recompute "full"): an event pair around each block's rebuilt
  // forward, and the mark it ran in; created on first use, reused every step.
  struct RecomputeEvents {
    cudaEvent_t begin = nullptr;
    cudaEvent_t end = nullptr;
    int mark = -1;
  };
  std::vector<RecomputeEvents> recompute_events_;
  size_t recompute_used_ = 0;  // pairs recorded since the last ResolveMarks
  int open_mark_ = -1;         // the mark begun and not yet ended, -1 outside marks
  Status RecordRecompute(bool begin);
};

// The CUDA backend for the assignment's shards (any dp: replica d reads the step's micro-batches
// d*m .. d*m + m - 1). INVALID_ARGUMENT for a model or shard the CPU backend would refuse too;
// UNAVAILABLE "no CUDA device: ..." where there is no GPU (checked after the spec, so spec errors
// show everywhere); INTERNAL naming the CUDA call for other device failures.
Result<std::unique_ptr<CudaBackend>> MakeCudaBackend(const v1::Assignment& assignment,
                                                     const CudaBackendOptions& options = {});

}  // namespace pipecoord::worker::cuda

#endif  // PIPECOORD_WORKER_CUDA_CUDA_BACKEND_H_
