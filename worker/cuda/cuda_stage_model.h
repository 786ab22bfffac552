// CudaStageModel: one virtual stage of the Llama-style decoder on a CUDA device: the same model
// as the CPU reference (worker/model/stage_model.h) with the same split of the backward pass
// into B (input gradient) and W (weight gradients, accumulated) for zero-bubble schedules.
//
// The Llama family's attention shapes as the CPU model runs them: grouped-query attention (wk, wv
// [kv_heads x head_dim, h]; query head i reads key/value head i / (heads / kv_heads)), heads of
// an explicit head_dim (wq [heads x head_dim, h], wo [h, heads x head_dim]) and Qwen2's q, k, v
// biases (added before RoPE; their gradients summed over the tokens in W), and tied input and
// output embeddings (Llama 3.2: a stage holding both uses the embedding's tensor for the LM head,
// both paths adding to its gradient; a head stage without the embedding keeps "output.weight", a
// copy started equal, whose gradient the executor sums with the embedding's at OPT through
// TiedEmbeddingGradient, and which the gradient norm leaves to the embedding's stage), and
// Mistral's sliding window (flash attention skips the key tiles before it). Refused by name at
// Create: head_dim over flash attention's 128.
//
// Same as the CPU StageModel: the blocks [first_layer, first_layer + num_layers), the token
// embedding on the stage with has_embedding, the final RMSNorm + LM head + cross-entropy on the
// stage with has_head; the initial weights of weight_init.h (computed on the host with the same
// names and standard deviations, copied to the device once); the head's B seeds dloss = 1/m
// (m = BatchShape::microbatches), so a step's accumulated gradients are those of the mean of
// its m micro-batch losses; AdamW decays matrices and the embedding, never norm gains.
//
// Per micro-batch, F keeps on the device what the backward needs; B computes the input
// gradient, frees what only B needed (q, k, v, the attention log-sum-exps, the SwiGLU inputs,
// the logits) and keeps what W needs (the layer inputs and the output gradients of each
// weight-carrying op), as TransformerBlock's BlockSaved splits them; W adds the weight
// gradients and frees the rest. Micro-batches are independent: any number in flight, in any
// order that keeps F < B < W for each.
//
// Everything is queued on the CudaDevice's one stream and returns once queued: no call waits
// for the GPU except TakeLossSum and the explicit downloads. Activations and their gradients are
// device tensors of ActivationSpec() ([micro-batch, seq, hidden] in the precision's dtype); a
// returned tensor may be read by the next stage as soon as its work is queued on this stream.
//
// Tensor parallelism (Create's `tp`, a group of size > 1; null or size 1: none), Megatron-style as
// the CPU model's (worker/model/transformer_block.h, lm_head.h), on the same slices of the same
// initial weights (TensorParallelSlice): column-parallel wq, wk, wv, w1, w3 and row-parallel wo,
// w2, this rank's heads (heads / tp) and SwiGLU columns (ffn / tp); a vocabulary-parallel
// embedding (this rank's rows, zeros for the others' tokens, summed over the group) and LM head
// with the vocabulary-parallel cross-entropy (kernels/cuda/cross_entropy.h: no rank holds a whole
// row of logits). The group's sums (Megatron's g in F after wo and w2, f's backward in B after
// the q/k/v and w1/w3 input gradients and the head's) run on `tp`'s FloatBuffer collectives over
// the device tensors (DeviceTensorFloats), in f32: bf16 tensors are widened, summed and rounded
// once. They block the calling thread until the group's ranks all made the call (the ranks of a
// group run the same actions in the same order). Replicated tensors (norm gains) stay identical
// across the group. With sequence parallelism (Create's sequence_parallel, tp > 1) the norms,
// residuals and the tensors between stages hold this rank's T/tp of the micro-batch's T = b s
// token rows ([r T/tp, (r+1) T/tp), ActivationSpec() [b, s/tp, h] as a shape); each tensor-
// parallel region all-gathers its input and reduce-scatters its output (Megatron's
// gather_from / reduce_scatter_to_sequence_parallel_region), W gathers again the shards it needs,
// and the norm gains' gradients, of this rank's tokens, are summed over the group by
// FinalizeGradients.
//
// Not thread-safe: one caller at a time.
#ifndef PIPECOORD_WORKER_CUDA_CUDA_STAGE_MODEL_H_
#define PIPECOORD_WORKER_CUDA_CUDA_STAGE_MODEL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kernels/cpu/adamw.h"
#include "kernels/tensor.h"
#include "worker/cuda/cuda_device.h"
#include "worker/cuda/precision.h"
#include "worker/model/model_config.h"
#include "worker/model/stage_shard.h"
#include "worker/model/transformer_block.h"
#include "worker/parallel/tensor_parallel.h"

namespace pipecoord::worker::cuda {

// One trainable tensor on the device. master, grad, adam_m and adam_v are fp32; compute is what
// the kernels read: master itself in fp32, its bf16 copy in bf16.
// Under ZeRO (ShardOptimizerStates) adam_m and adam_v hold only the tensor's elements
// [moment_begin, moment_begin + adam_m.numel()) inside this replica's shard (views of the stage's
// one flat moment buffer; empty when the tensor lies outside the shard). In bf16 the master is
// sharded the same way (masters_sharded(): a view of the stage's flat master buffer, as many
// elements as adam_m), since the kernels read the whole bf16 copy only, as Megatron's distributed
// optimizer keeps it. Under ZeRO-2 `grad` is empty outside a step's backward passes
// (ReleaseGradients): the shard's gradients live in the stage's flat shard-gradient buffer then.
struct DeviceParameter {
  std::string name;  // Llama's, as the CPU model's ("layers.3.attention.wq.weight")
  std::vector<int64_t> shape;
  bool weight_decay = true;
  kernels::Tensor master, grad, adam_m, adam_v, compute;
  int64_t moment_begin = 0;
  int64_t shard_at = 0;  // under ZeRO: where its shard elements sit in the stage's flat shard buffers
  int64_t elements = 0;  // of the whole tensor (this tp rank's slice), whatever is sharded

  int64_t numel() const { return elements; }
  bool sharded() const { return adam_m.numel() != numel(); }
};

// What Forward reads. Fill the fields the stage uses; the others must stay empty.
struct CudaStageInput {
  std::vector<int32_t> tokens;   // host [b * s] ids in [0, vocab): the stage with the embedding
  kernels::Tensor activations;   // device ActivationSpec(): every stage without the embedding
  std::vector<int32_t> targets;  // host [b * s] next-token ids: the stage with the head
};

class CudaStageModel {
 public:
  // Builds the stage on `device` (which must outlive it) and uploads its initial weights (this
  // rank's slices under `tp`, which must outlive it too). Errors name the config field or shard
  // rule broken (tp must divide heads, kv_heads, ffn_hidden and vocab), or the CUDA call that failed.
  static Result<std::unique_ptr<CudaStageModel>> Create(const model::ModelConfig& config,
                                                        const model::StageShard& shard,
                                                        const model::BatchShape& batch,
                                                        Precision precision, CudaDevice* device,
                                                        parallel::TensorParallel* tp = nullptr,
                                                        bool sequence_parallel = false);
  ~CudaStageModel();
  CudaStageModel(const CudaStageModel&) = delete;
  CudaStageModel& operator=(const CudaStageModel&) = delete;

  // [micro_batch_size, seq_len, hidden] in f32 or bf16: what enters and leaves the stage
  // ([micro_batch_size, seq_len / tp, hidden] with sequence parallelism: this rank's token rows).
  kernels::TensorSpec ActivationSpec() const;

  // F of micro-batch mb (any id >= 0 not in flight). Returns the activations for the next stage,
  // or on the head stage an empty tensor: its loss is added to the device-side sum that
  // TakeLossSum reads (and, when `loss` is given, also handed out there: one device double).
  Result<kernels::Tensor> Forward(int mb, CudaStageInput input, kernels::Tensor* loss = nullptr);
  // The replay probe: F of mb again, on the input its F read (still held: before mb's B) and the
  // same weights, keeping nothing and adding no loss to the step's sum. `input` carries the
  // tokens and targets again (the embedding and head stages); the activations are the held ones.
  // Returns the output (empty on the head stage, whose loss goes to *loss as in Forward).
  // FAILED_PRECONDITION when mb's F has not run or its B has.
  Result<kernels::Tensor> ReplayForward(int mb, CudaStageInput input, kernels::Tensor* loss);
  // F on the given input, keeping nothing and adding no loss to the step's sum (the seeded replay).
  Result<kernels::Tensor> ForwardOnly(CudaStageInput input, kernels::Tensor* loss);
  // B: from grad_output (ActivationSpec(); empty on the head stage, which starts from its loss)
  // returns the gradient w.r.t. the stage's input (empty on the embedding stage).
  Result<kernels::Tensor> BackwardInput(int mb, kernels::Tensor grad_output);
  // W: adds mb's weight gradients and frees everything mb still held. Needs mb's B first.
  Status BackwardWeight(int mb);
  // BW: BackwardInput then BackwardWeight.
  Result<kernels::Tensor> BackwardFull(int mb, kernels::Tensor grad_output);

  Status ZeroGrad();
  // One AdamW step on every parameter (weight_decay on matrices and the embedding only), then
  // the bf16 copies are refreshed from the masters. Refuses options out of range and refuses to
  // run while a micro-batch is in flight, as the CPU model does. Under ZeRO only the shard's
  // elements are stepped: in fp32 the data-parallel all-gather of the masters brings the other
  // replicas' shards; in bf16 (sharded masters) the step rounds its shard's bf16 copy and the
  // all-gather of the bf16 copies brings the rest.
  Status OptimizerStep(const kernels::cpu::AdamWOptions& options);

  // Activation recompute (JobSpec.recompute), set before the first micro-batch; the results
  // stay bit for bit those of kNone. kFull: F keeps each block's input only and B runs the
  // block's forward again (the same kernels on the same input, so the same bits) just before its
  // backward; W uses what B left, as without recompute. kSelective changes nothing here: flash
  // attention never keeps the s x s probabilities that selective recompute drops (its B always
  // rebuilds them from the log-sum-exps). FAILED_PRECONDITION while a micro-batch is in flight.
  Status SetRecompute(model::Recompute recompute);
  model::Recompute recompute() const { return recompute_; }
  // Called on the stream's order around each block's rebuilt forward in B (begin true, then
  // false): the backend times the recompute on the device with it. An error fails the B.
  void set_recompute_marker(std::function<Status(bool begin)> marker) { recompute_marker_ = std::move(marker); }

  // ZeRO-1, as the CPU model's ShardOptimizerStates (worker/model/stage_model.h): the stage's
  // parameters in order form one flat index space of n elements; this replica (index of
  // `shards`) keeps the AdamW moments of its chunk [ChunkBegin(n, shards, index), ChunkBegin(n,
  // shards, index + 1)) only (worker/parallel/collectives.h's chunks: what the reduce-scatter
  // leaves averaged here), in one flat buffer of ceil(n / shards) elements per moment (and in
  // bf16 one for the fp32 masters, whose whole tensors are freed: masters_sharded()). Before
  // the first optimizer step only (FAILED_PRECONDITION after); INVALID_ARGUMENT for a bad index.
  // shard_gradients (ZeRO-2): the gradients too live for the shard only outside a step's backward
  // passes, as the CPU model's: the whole ones from the step's first W (or BW) to
  // ReleaseGradients (at OPT, after the data-parallel reduce-scatter left each replica's shard
  // summed), which copies the shard's elements into one flat buffer of ceil(n / shards) and
  // frees the whole ones; they start released. The norm, clipping and the optimizer step then
  // read the shard's.
  Status ShardOptimizerStates(int shards, int index, bool shard_gradients = false);
  // Nothing to do without ZeRO-2 or when released already; on an error (no memory for the
  // shard's buffer) the whole gradients stay as they were.
  Status ReleaseGradients();
  bool gradients_released() const { return released_; }
  // *acc (one device double) += the sum of squares of the gradients the optimizer step applies
  // (every element, or the shard's), tensor by tensor in model order (the CPU model's
  // GradientSquareSum). `partials`: elementwise.h's scratch. Under tensor parallelism the
  // replicated tensors (norm gains) only with count_replicated (one rank of the group counts them).
  Status AccumulateGradientSquares(double* acc, double* partials, bool count_replicated = true);
  // Every gradient *= factor (clipping), one f32 multiplication each.
  Status ScaleGradients(float factor);
  // Tied embeddings: the gradient of the token embedding (the stage holding it) or of the head's
  // copy (a head stage without it), f32 on the device, a handle sharing the parameter's storage;
  // empty when the model is untied or the stage holds neither.
  kernels::Tensor TiedEmbeddingGradient();
  // Sequence parallelism: each norm gain's gradient (this rank's tokens) summed over the group, in
  // model order; nothing otherwise. Before the step's gradient norm and optimizer step.
  Status FinalizeGradients();
  int64_t optimizer_steps() const { return optimizer_steps_; }
  void set_optimizer_steps(int64_t steps) { optimizer_steps_ = steps; }
  // Re-rounds the bf16 compute copies from the fp32 masters (after the masters were written
  // from outside, e.g. by a checkpoint load); nothing to do in fp32. With sharded masters only
  // the shard's elements: the others must come from the replicas' all-gather of the bf16 copies.
  Status RefreshComputeWeights();
  // bf16 under ZeRO: each replica keeps its shard of the fp32 masters only (see DeviceParameter).
  bool masters_sharded() const { return masters_sharded_; }

  // Head stage: the sum of the micro-batch losses of every Forward since the last call, read
  // from the device (waits for the stream), then zeroed. 0 on other stages.
  Result<double> TakeLossSum();

  // Every parameter in model order (the CPU model's order and names).
  std::vector<DeviceParameter>& parameters() { return params_; }
  const DeviceParameter* FindParameter(std::string_view name) const;

  int MicroBatchesInFlight() const { return static_cast<int>(in_flight_.size()); }
  const model::ModelConfig& config() const { return config_; }
  const model::StageShard& shard() const { return shard_; }
  const model::BatchShape& batch() const { return batch_; }
  int tensor_parallel_size() const { return tp_ != nullptr ? tp_->size() : 1; }
  Precision precision() const { return precision_; }
  CudaDevice& device() { return *device_; }

 private:
  struct BlockState;
  struct HeadState;
  struct MicroBatch;
  struct Layer;
  enum class Phase { kForwardDone, kInputGradDone };

  CudaStageModel(const model::ModelConfig& config, const model::StageShard& shard,
                 const model::BatchShape& batch, Precision precision, CudaDevice* device,
                 parallel::TensorParallel* tp, bool sequence_parallel);
  Status Build();
  // `init_name`: the tensor whose initial values it takes (a tied head's copy: the embedding's).
  Status AddParameter(const std::string& name, std::vector<int64_t> shape, double std,
                      bool weight_decay, const std::string& init_name = "");
  // A head stage without the embedding, of a tied model: its "output.weight" is the copy.
  bool TiedHeadCopy() const { return config_.tied_embeddings && shard_.has_head && !shard_.has_embedding; }
  Status CheckInput(int mb, const CudaStageInput& input) const;
  Status CheckGradient(const kernels::Tensor& grad_output) const;
  Result<MicroBatch*> Find(int mb, Phase phase, const char* what);

  // The work itself, for T = float or __nv_bfloat16 (the activation and compute-weight type).
  // `loss`: the head's micro-batch loss handed out when non-null; `add_to_sum`: added to the
  // step's loss sum (training F) or not (replays).
  template <typename T>
  Result<kernels::Tensor> ForwardAs(MicroBatch& state, CudaStageInput& input, kernels::Tensor* loss, bool add_to_sum);
  template <typename T>
  Status BlockForward(const Layer& layer, BlockState& s, kernels::Tensor x, kernels::Tensor* y);
  template <typename T>
  Result<kernels::Tensor> BackwardInputAs(MicroBatch& state, kernels::Tensor grad_output);
  template <typename T>
  Status BlockBackwardInput(const Layer& layer, BlockState& s, kernels::Tensor dy,
                            kernels::Tensor* dx);
  template <typename T>
  Status BackwardWeightAs(MicroBatch& state);
  template <typename T>
  Status BlockBackwardWeight(const Layer& layer, BlockState& s);

  // In place: t = the sum of t over the tensor-parallel group (nothing without one), in f32.
  template <typename T>
  Status ReduceFromTensorParallel(kernels::Tensor& t);
  // Sequence parallelism's mapping points on [tokens, h] tensors in T: every rank's token shard
  // side by side (a new [n, h]), and this rank's rows of the group's sum of `partial` (a new
  // [n / tp, h]), in f32 (bf16 widened, rounded once).
  template <typename T>
  Result<kernels::Tensor> GatherSequence(const kernels::Tensor& shard);
  template <typename T>
  Result<kernels::Tensor> ScatterSequence(kernels::Tensor partial);
  // GatherSequence with sequence parallelism; without it `shard` itself (it holds every token).
  template <typename T>
  Result<kernels::Tensor> AllTokens(const kernels::Tensor& shard);
  // Megatron's g after a row-parallel layer (and f's backward): ScatterSequence with sequence
  // parallelism, else the group's sum in place.
  template <typename T>
  Result<kernels::Tensor> SumOverGroup(kernels::Tensor partial);
  // The vocabulary-parallel cross-entropy of the head's logits (this rank's slice): the loss to
  // *loss (one device double), the logits turned into B's probabilities in place.
  template <typename T>
  Status VocabParallelLoss(HeadState& s, kernels::Tensor& loss);

  Result<kernels::Tensor> Activation(int64_t features);  // [b * s, features] in T
  Result<kernels::Tensor> Local(int64_t features);       // [this rank's tokens, features] in T
  Result<kernels::Tensor> Floats(int64_t count);         // f32 [count]

  model::ModelConfig config_;
  model::StageShard shard_;
  model::BatchShape batch_;
  Precision precision_;
  CudaDevice* device_;
  parallel::TensorParallel* tp_ = nullptr;  // null when tp = 1
  int tp_rank_ = 0;
  bool sp_ = false;          // sequence parallelism
  int64_t local_tokens_ = 0;  // b * s, or b * s / tp with sequence parallelism
  // b * s, h; this rank's SwiGLU width (ffn / tp), q and o width (heads x head_dim / tp), k and v
  // width (kv_heads x head_dim / tp), query heads, key/value heads, vocabulary rows
  int64_t tokens_ = 0, hidden_ = 0, ffn_ = 0, width_ = 0, kv_width_ = 0, heads_ = 0, kv_heads_ = 0, vocab_ = 0;

  std::vector<DeviceParameter> params_;
  std::vector<Layer> layers_;  // parameter indices of each block
  int embedding_ = -1, norm_ = -1, output_ = -1;  // parameter indices, -1 when not held
  kernels::Tensor rope_cos_, rope_sin_;  // the CPU model's RoPE table, [seq, head_dim / 2] double
  kernels::Tensor loss_sum_;             // one double: the head's losses since TakeLossSum

  std::map<int, MicroBatch> in_flight_;
  int64_t optimizer_steps_ = 0;
  model::Recompute recompute_ = model::Recompute::kNone;
  std::function<Status(bool)> recompute_marker_;
  kernels::Tensor shard_m_, shard_v_;         // ZeRO: the flat moment buffers the views share
  kernels::Tensor shard_master_;              // ZeRO in bf16: the flat fp32 master shard
  bool masters_sharded_ = false;
  bool shard_gradients_ = false, released_ = false;  // ZeRO-2, and whether the whole gradients are gone
  kernels::Tensor shard_grad_;                // ZeRO-2 while released: the shard's gradients, flat
  // ZeRO-2: the whole gradients again (zeros, the shard's buffer freed first) for a step's first W.
  Status EnsureGradients();
  // The gradient the optimizer step applies to p: its shard's elements (released: in the flat
  // buffer), or all of them; adam_m.numel() floats.
  float* OptimizerGrad(DeviceParameter& p);
};

}  // namespace pipecoord::worker::cuda

#endif  // PIPECOORD_WORKER_CUDA_CUDA_STAGE_MODEL_H_
