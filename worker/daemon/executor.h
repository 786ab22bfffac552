// Executor: runs one rank's job list for every step of a job. Receives are posted early (the
// transport buffers arrivals), so a compute action waits only for its own input; sends are
// asynchronous. With dp > 1, the replicas' gradients are averaged with a ring all-reduce over
// the transport (worker/parallel/collectives.h), one of two ways:
// - stage by stage (the plan has REDUCE_GRAD, CPU jobs: jobplan::ReducesGradientsPerStage): a
//   REDUCE_GRAD launches its stage's all-reduce (ComputeBackend::StageGradients, channel
//   kStageGradientChannel + stage) on a background thread and returns at once, so it overlaps
//   the rest of the rank's cool-down; the rank's reductions run one at a time in list order, and
//   OPT (or the step's end) waits for them all before the optimizer step. A REDUCE_GRAD's timing
//   is its all-reduce's span on that thread (from its start to its end; it overlaps the actions
//   after it), OPT's is the optimizer step after the wait. For dp 2 the result is bit for bit the
//   one all-reduce's (a + b is b + a); for dp > 2 the order of additions of an element depends on
//   its ring chunk, which differs, so the last bits may differ (each way is deterministic).
// - after the step: OPT first all-reduces every gradient, on the host over Gradients()'s spans,
//   or on the device when the backend's gradients live there (DeviceGradients,
//   the same ring over the backend's FloatBuffer; the CUDA backend, which answers REDUCE_GRAD with
//   UNIMPLEMENTED).
// ZeRO (spec.zero >= 1, dp > 1; the backend holds one shard of each stage's moments): the
// reduction is a reduce-scatter that leaves this replica's chunk of the stage's flat gradients
// averaged (parallel::ReduceScatterMean), at REDUCE_GRAD as above or, without REDUCE_GRAD, stage
// by stage at OPT; OPT then steps the shard and all-gathers each stage's values over the
// replicas (channel kParameterGatherChannel + stage), stages in ascending order, inside OPT's span.
// A backend whose load wrote one shard only (ComputeBackend::ValuesNeedGather: the CUDA backend's
// sharded bf16 masters after a checkpoint or spec.init) gets the same all-gather before the first
// step (channel kLoadGatherChannel + stage).
// The bytes this rank sends in all of these go into the action's dp_comm_bytes.
// Tied embeddings (spec.model.tiedEmbeddings, the embedding and the LM head on different stages):
// after the data-parallel reduction, the rank of stage 0 and the rank of the last stage of each
// (replica, shard) all-reduce the embedding's and the head copy's gradients, two members on
// channel kTiedEmbeddingChannel, so both hold the same sum and take the same optimizer step
// (Megatron's embedding group); a rank holding both stages adds them itself. On the backend's
// device buffers where it keeps them there (DeviceTiedEmbeddingGradient: the CUDA backend's).
// Before the optimizer step OPT sums the squares of the gradients it will apply over its replica
// (an all-reduce of one float, channel kGradNormChannel; under ZeRO, whose ranks each hold a shard,
// then over its data-parallel group), clips them when
// spec.optimizer.clipGradNorm asks, and reports the norm and the step's learning rate in the
// step's summary (backends without GradientSquareSum report none).
//
// The step commit (options.commit: jobs that recover a lost rank in place, jobplan/recovery.h):
// right before the optimizer step, after the reductions, the norm and clipping, every rank of the
// job all-gathers a few floats (whether it holds a loss, and the loss's bits), so no rank updates
// its weights for a step before every rank has everything it needs to update its own. In two
// rings, as the norm: its replica's (channel kCommitChannel), then its data-parallel group's, each
// member bringing its replica's floats (kCommitChannel + 1): (pp tp - 1) + (dp - 1) hops where one
// ring over the job was world - 1 (254 hops, not 16,383, at pp 16 x dp 128 x tp 8). Finishing the
// second proves every rank entered: the group has a member in every replica, each of which had
// its whole replica's floats. When a rank is lost, the survivors' commit states (commit_state()) decide where
// the job resumes: a survivor that passed step S's commit proves every rank entered it, so each
// one that was still waiting there can apply S itself (ResumeAt), and no survivor can have passed
// S + 1's; the step in flight is abandoned and run again. The all-gather also tells every rank
// each rank's step loss, so the coordinator can complete a lost rank's step records.
//
// Each action is timed for telemetry (v1::ActionTiming) on options.clock_ns. By the host clock:
// a compute action from when its input is there to when its call returned, wait_ns how long
// the input took to come (wait_peer: from which rank). A backend that queues its work
// asynchronously (ComputeBackend::TimesOnDevice) is timed on its device instead, since its calls
// return once their kernels are queued: F, B, W, BW and OPT (its all-reduce and optimizer step)
// report the device spans of their work, resolved after the step's last action, and a compute
// action's wait_ns becomes the part of the device's idle gap before it (from the previous timed
// action's device end, in this step or the one before, to its own device start) during which
// the executor was waiting for its input: the time the device idled for want of that input. A
// device that was still busy when the input came waited for nothing (0). Sends, receives and
// PROBE keep host times in both cases, and RunHooks::AfterCompute gets the call's host time
// (on a device backend, its launch: the device spans exist only once the step is over).
#ifndef PIPECOORD_WORKER_DAEMON_EXECUTOR_H_
#define PIPECOORD_WORKER_DAEMON_EXECUTOR_H_

#include <atomic>
#include <climits>
#include <chrono>
#include <functional>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <vector>

#include "common/rank_layout.h"
#include "common/status.h"
#include "jobplan/layout.h"
#include "proto/telemetry.pb.h"
#include "proto/worker.pb.h"
#include "worker/checkpoint/async_writer.h"
#include "worker/daemon/compute_backend.h"
#include "worker/daemon/run_hooks.h"
#include "worker/parallel/tensor_parallel.h"
#include "worker/transport/transport.h"

namespace pipecoord::worker {

struct ExecutorOptions {
  // The stage's tensor-parallel group (spec.tp > 1), whose time and bytes inside each compute
  // action are reported with it (ActionTiming.tp_comm_ns, tp_comm_bytes). Null: none. Not owned.
  const parallel::TensorParallel* tensor_parallel = nullptr;
  std::chrono::milliseconds recv_timeout{60000};  // a peer silent this long fails the job
  std::function<int64_t()> clock_ns;               // the coordinator's clock (offset applied)
  RunHooks* hooks = nullptr;                        // progress, probes, injected faults; not owned
  // Saves the backend's state at the end of every spec.checkpoint_every-th step and of the step
  // a graceful stop ends on, in the background; null: no checkpoints. Not owned.
  AsyncCheckpointWriter* checkpoints = nullptr;
  // Runs the step commit before each optimizer step (above); jobplan::RunsStepCommit(spec).
  bool commit = false;
  // Carries the host-memory collectives (the gradient norm's float, the step commit's) when the
  // executor's transport takes device tensors only (NCCL); null: the executor's transport carries
  // them too (TCP, the staged transport). Not owned; its channels are the executor's own.
  Transport* host_transport = nullptr;
};

// One finished step: its timed actions and its summary (loss, memory).
struct StepReport {
  std::vector<v1::ActionTiming> actions;
  v1::StepSummary summary;
};

class Executor {
 public:
  // `backend` holds this rank's stages; `transport` reaches every member of the job by global
  // rank (jobplan/layout.h). Neither is owned.
  Executor(const v1::Assignment& assignment, ComputeBackend* backend, Transport* transport,
           ExecutorOptions options);
  // Waits for the gradient all-reduces still running in the background (a step that failed
  // left them; a shut-down transport ends them at once).
  ~Executor();

  // Runs steps assignment.start_step .. spec.steps - 1, calling `on_step` after each (a non-OK
  // return stops the run); a due checkpoint is saved before its step is reported. Returns the
  // first error: a failed action names the step, position and action.
  Status Run(const std::function<Status(StepReport&&)>& on_step);

  // Makes Run return FAILED_PRECONDITION("cancelled") at the next action; thread-safe.
  void Cancel() { cancelled_ = true; }

  // Where this rank stands in the step commits (options.commit); thread-safe, meaningful once Run
  // has returned.
  v1::CommitState commit_state() const;
  // After Run failed or was cancelled, on a job that commits its steps: brings the rank to the end
  // of step resume_step - 1 and makes the next Run start at resume_step over `transport` (the
  // rebuilt data plane). That step must be the last one whose commit this rank passed, or the one
  // after it when it was waiting in that step's commit (another rank passed it): its optimizer
  // step is applied now. A step whose report Run had not given yet is reported to `on_step`
  // (without its validation, which needs every rank). The step in flight is abandoned
  // (ComputeBackend::AbortStep). FAILED_PRECONDITION when the rank cannot get there.
  Status ResumeAt(int resume_step, Transport* transport, const std::function<Status(StepReport&&)>& on_step);
  // Makes Run return FAILED_PRECONDITION("shutting down: stopped after step N of S") once step
  // `step` is done (-1: the current step), with its checkpoint saved when the job saves any (a
  // graceful stop: the step's work and telemetry are complete). A step already passed stops after
  // the current one. The last call wins; thread-safe.
  void StopAfterStep(int step = -1) { stop_after_step_ = step; }

 private:
  Status RunAction(const v1::Action& a, int step, StepReport* report);
  // The end of a step whose actions all ran: its summary, due checkpoint, memory figures,
  // validation (when `validate`), then on_step. *stopping: a graceful stop ends the run here.
  Status FinishStep(int step, StepReport* report, bool validate, const std::function<Status(StepReport&&)>& on_step,
                    bool* stopping);
  // The step commit of `step` (options.commit), before its optimizer step.
  Status Commit(int step);
  // Validation after `step` (jobplan::EvaluatesAfter): evalBatches micro-batches forward through
  // the pipeline, each rank running its stages in model order (activations to the next stage's
  // rank on their own channel), no weight touched. The loss when this rank holds the head.
  Result<std::optional<double>> RunValidation(int step);
  // Device timing: replaces the step's timed entries by their device spans and waits.
  Status ResolveDeviceTimes(StepReport* report);
  // REDUCE_GRAD: launches stage `stage`'s all-reduce behind the ones launched before it.
  Status LaunchStageReduce(int stage, int step, size_t entry);
  // Waits for every launched all-reduce; sets their timings in `report`; the first error names
  // the stage and its REDUCE_GRAD.
  Status FinishStageReduces(StepReport* report);
  // OPT's data-parallel part around the optimizer step: the reduction when no REDUCE_GRAD ran it,
  // the step, and ZeRO's all-gather. Adds the bytes sent to *bytes.
  Status OptimizerStepWithDataParallel(int step, uint64_t* bytes);
  // ZeRO's all-gather of every stage held (channel + stage, stages ascending), then
  // ComputeBackend::ParametersGathered.
  Status GatherParameters(int step, uint32_t channel, uint64_t* bytes);
  // Tied embeddings, at OPT after the data-parallel reduction: the embedding's and the head copy's
  // gradients summed (tied_group_), so both take the same step.
  Status SumTiedEmbeddingGradients(int step, uint64_t* bytes);
  // Before the optimizer step: the global gradient norm over norm_group_, clipping, and the
  // step's learning rate (has_grad_norm_, grad_norm_, learning_rate_).
  Status GlobalNormAndClip(int step);
  // Where the host-memory collectives go: ExecutorOptions::host_transport, else the transport.
  Transport& HostTransport() const { return options_.host_transport != nullptr ? *options_.host_transport : *transport_; }
  // The global rank of pipeline rank `pp_rank` in this rank's replica and tensor shard.
  int Global(int pp_rank) const { return layout_.AtPipelineRank(global_, pp_rank); }
  size_t Key(int stage, int mb) const { return static_cast<size_t>(stage) * mbs_ + mb; }
  Result<kernels::Tensor> Input(int producer_stage, int consumer_stage, int mb, int step, uint32_t channel);
  // The pipeline rank whose input a compute action waits for; -1 when it is local or none.
  int InputPeer(const v1::Action& a) const;

  const v1::Assignment& a_;
  ComputeBackend* backend_;
  Transport* transport_;
  ExecutorOptions options_;
  RankLayout layout_;
  int global_, dp_, rank_, dp_rank_, stages_, mbs_;
  std::vector<int> data_group_;  // this rank's replicas (same pipeline rank and shard), by dp rank
  std::vector<int> stage_to_rank_;
  // Results waiting for a same-rank consumer (V turns, p = 1) or for their SEND, by (stage, mb).
  std::vector<kernels::Tensor> local_act_, local_grad_, out_act_, out_grad_;
  // Device timing (backend_->TimesOnDevice()): this step's timed actions, in mark order.
  struct DeviceTimed {
    size_t entry;        // index in the step report's actions
    int64_t wait_from;   // host clock: the action started waiting for its input
    int64_t input_at;    // host clock: its input was there
  };
  bool device_timing_ = false;
  // Stage-by-stage gradient reduction (the job list has REDUCE_GRAD): this step's launched
  // all-reduces, in launch order; each waits for the one before it.
  struct StageReduce {
    int stage;
    size_t entry;            // its REDUCE_GRAD's timing in the step report
    int64_t launched_ns;     // options.clock_ns at the launch
    std::chrono::steady_clock::time_point launched;
    struct Done {
      Status status;
      uint64_t bytes_sent = 0;
      std::chrono::steady_clock::time_point start, end;
    };
    std::shared_future<Done> done;
  };
  bool reduces_by_stage_ = false;
  bool zero_ = false;        // ZeRO-1: reduce-scatter, step the shard, all-gather the values
  // This rank's replica (its pp x tp ranks, in global order): the first ring of the gradient norm
  // and the step commit (data_group_, above, the second).
  parallel::Group replica_group_;
  // Tied embeddings: this rank's place in its embedding group {the rank of stage 0, the rank of the
  // last stage} of its (replica, shard); empty ranks when it holds neither or the model is untied.
  parallel::Group tied_group_;
  // This step's OPT: the global gradient norm (has_grad_norm_) and the learning rate it used.
  bool has_grad_norm_ = false;
  double grad_norm_ = 0, learning_rate_ = 0;
  std::vector<int> stages_held_;  // the stages this rank holds, ascending
  std::vector<StageReduce> stage_reduces_;
  std::vector<DeviceTimed> device_timed_;
  // The last timed action's device end (this step or an earlier one); none yet: the minimum.
  int64_t device_free_since_ = std::numeric_limits<int64_t>::min();
  // The step commits (options.commit), guarded by commit_mu_ for commit_state().
  mutable std::mutex commit_mu_;
  v1::CommitState commit_;
  bool step_has_loss_ = false;  // the step's loss, taken at its commit
  double step_loss_ = 0;
  int first_step_ = 0;          // where Run starts: the assignment's start_step, or ResumeAt's
  int applied_step_ = -1;       // the last step whose optimizer step the backend applied
  int reported_through_ = -1;   // the last step given to on_step
  int current_step_ = -1;       // the step `current_` holds the actions of
  StepReport current_;          // the step in progress (kept when Run fails, for ResumeAt)
  std::atomic<bool> cancelled_{false};
  std::atomic<int> stop_after_step_{INT_MAX};  // INT_MAX: run to the end
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_EXECUTOR_H_
