// StageModel: one virtual stage of the Llama-style decoder, driven one micro-batch at a time
// in whatever order a pipeline schedule asks: F, then B and W separately (zero-bubble) or BW.
//
// A stage holds blocks [first_layer, first_layer + num_layers), plus the token embedding if
// has_embedding and the final RMSNorm, LM head (untied) and cross-entropy if has_head. Weights
// come from (seed, tensor name) with the global layer index in the name (weight_init.h), so a
// layer starts identical under every partition, and a chain of stages computes bit for bit
// what one stage holding every layer computes.
//
// Per micro-batch, F saves what the backward needs; B computes the input gradient and keeps
// only what W needs; W accumulates weight gradients and frees the rest. Micro-batches are
// independent: any number may be in flight, in any interleaving that respects F < B < W for
// each. Gradients accumulate across micro-batches until ZeroGrad.
//
// Loss scaling: Forward on the head stage returns the micro-batch's plain mean token loss; the
// head's B seeds the backward with dloss = 1/m (m = BatchShape::microbatches), so the gradients
// accumulated over a step's m micro-batches are those of the step loss, the mean of the m
// micro-batch losses. Nothing else is scaled.
//
// Initial weights (uniform with the given std): tok_embeddings 1 (tied: 1/sqrt(h)); wq, wk, wv, w1, w3
// 1/sqrt(h); wo 1/sqrt(heads x head_dim) and w2 1/sqrt(ffn), each divided by sqrt(2 layers); output
// 1/sqrt(h); norm gains 1. AdamW decays matrices and the embedding, never norm gains.
//
// Sequence parallelism (Create's sequence_parallel, tp > 1): activations passed between stages
// and everything outside the tensor-parallel regions are this rank's 1/tp of the micro-batch's
// tokens (rows [r T/tp, (r+1) T/tp) of [b s, h]); tokens and targets stay whole; the embedding
// reduce-scatters its lookups and its W gathers the output gradient again (transformer_block.h,
// lm_head.h).
//
// Tensor parallelism: Create with the group's TensorParallel (tp = its size() > 1) builds this
// rank's slices (transformer_block.h, lm_head.h: Megatron's split; a vocabulary-parallel
// embedding: rows [r V/tp, (r+1) V/tp), tokens outside them looked up as zeros and the group's
// lookups summed), each cut from the whole tensor the seed gives (weight_init.h), under the
// whole tensor's name. Every rank of the group is called with the same inputs in the same order
// and returns the same activations, input gradients and loss; a failed collective fails the call
// with its error.
//
// Tied embeddings (config.tied_embeddings): the LM head's matrix is the token embedding's. A
// stage with both holds one tensor, "tok_embeddings.weight", whose gradient both paths add to; a
// head stage without the embedding holds "output.weight" as a copy started from the embedding's
// values (the same seed and name), and the two stay equal because the caller sums the two
// gradients (TiedEmbeddingGradient) after the data-parallel reduction, as Megatron's embedding
// group does, so both take the same optimizer step; GradientSquareSum leaves the copy out.
//
// Not thread-safe: one caller at a time.
#ifndef PIPECOORD_WORKER_MODEL_STAGE_MODEL_H_
#define PIPECOORD_WORKER_MODEL_STAGE_MODEL_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/rotary.h"
#include "worker/model/lm_head.h"
#include "worker/model/model_config.h"
#include "worker/model/parameter_store.h"
#include "worker/model/stage_shard.h"
#include "worker/model/transformer_block.h"

namespace pipecoord::model {

// What Forward reads. Fill the fields the stage uses; the others must stay empty.
struct StageInput {
  kernels::HostBuffer<int32_t> tokens;     // [b * s] ids in [0, vocab): the stage with the embedding
  kernels::HostBuffer<float> activations;  // [b * s * h]: every stage without the embedding
  kernels::HostBuffer<int32_t> targets;    // [b * s] next-token ids: the stage with the head
};

struct StageOutput {
  kernels::HostBuffer<float> activations;  // [b * s * h] for the next stage; empty on the head stage
  std::optional<double> loss;      // head stage only: the micro-batch's mean token loss
};

class StageModel {
 public:
  // Builds and initialises the stage. Errors name the config field or shard rule broken.
  // tp: the stage's tensor-parallel group (null: tp 1); it must outlive the model. tp must divide
  // heads, the SwiGLU width and vocab (INVALID_ARGUMENT naming which).
  static Result<std::unique_ptr<StageModel>> Create(const ModelConfig& config,
                                                    const StageShard& shard,
                                                    const BatchShape& batch,
                                                    worker::parallel::TensorParallel* tp = nullptr,
                                                    bool sequence_parallel = false);
  StageModel(const StageModel&) = delete;
  StageModel& operator=(const StageModel&) = delete;

  // F of micro-batch mb (any id >= 0 not in flight). Returns the activations for the next
  // stage or, on the head stage, the loss.
  Result<StageOutput> Forward(int mb, StageInput input);
  // F with nothing kept for a backward (validation, probes): the same outputs as Forward, bit for
  // bit, and no micro-batch left in flight; each block's saved state is dropped as the next block
  // starts (the call holds only its output when it returns; memory/'s pipecoord_cpu.h replays
  // its allocations for the budget).
  Result<StageOutput> ForwardOnly(StageInput input);
  // The head stage's logits of micro-batch mb, [b * s, vocab] row-major, kept from its F until
  // its B (the head's own buffer, not a copy; valid until the next call on mb). What a peer's
  // logits are compared with (tests/hf_weights: transformers' own). FAILED_PRECONDITION unless
  // this is the head stage at tp 1 (under tp no rank holds a whole row, and F turns the rank's
  // slice into probabilities) and mb's F ran and its B has not.
  Result<std::span<const float>> Logits(int mb) const;
  // The replay probe: F of micro-batch mb once more, on copies of the input its F read (what F
  // kept for the backward: the tokens, the first block's or the head's input, the targets), with
  // the weights as they are; a deterministic kernel gives Forward's output bit for bit.
  // FAILED_PRECONDITION unless mb's F ran and its B has not (the input is kept until then, the
  // tokens until W). With tp, every rank of the group must replay the same mb (collectives).
  Result<StageOutput> ReplayForward(int mb);
  // The seeded replay: F (ForwardOnly) on inputs drawn from `seed` (token and target ids uniform
  // in [0, vocab), activations uniform in [-1, 1)), so every data-parallel replica of the stage,
  // whose weights are the same, gives the same bits. With sequence parallelism each rank of the
  // group draws its own 1/tp of the tokens (its rank mixed into the seed); every rank of the
  // group must call it together.
  Result<StageOutput> SeededForward(uint64_t seed);
  bool Replayable(int mb) const;
  // B: from grad_output ([b * s * h]; empty on the head stage, which starts from its loss)
  // returns the gradient w.r.t. this stage's input activations (empty on the embedding stage).
  Result<kernels::HostBuffer<float>> BackwardInput(int mb, kernels::HostBuffer<float> grad_output);
  // W: adds mb's weight gradients and frees everything mb still held. Needs mb's B first.
  Status BackwardWeight(int mb);
  // BW: BackwardInput then BackwardWeight.
  Result<kernels::HostBuffer<float>> BackwardFull(int mb, kernels::HostBuffer<float> grad_output);
  // The one-pass backward baseline (weight gradients computed right after each op's input
  // gradient); same results as BackwardFull, bit for bit, but never holds B-to-W state.
  Result<kernels::HostBuffer<float>> BackwardFused(int mb, kernels::HostBuffer<float> grad_output);

  void ZeroGrad();
  // Forgets every micro-batch in flight (a step abandoned half way: in-place recovery runs it
  // again); gradients are the caller's to zero.
  void DropMicroBatches() { in_flight_.clear(); }
  // One AdamW step on every parameter element whose moments the stage holds (all of them, or its
  // ZeRO shard: ShardOptimizerStates), weight_decay on matrices only. Refuses options
  // out of range (lr, eps, weight_decay >= 0; betas in [0, 1)) and refuses to run while a
  // micro-batch is in flight (its W would be lost or land in the next step).
  Status OptimizerStep(const kernels::cpu::AdamWOptions& options);
  // After the step's last W and the data-parallel reduction, before the norm and the optimizer:
  // with sequence parallelism the norm gains' gradients (each rank's over its own tokens) summed
  // over the tensor-parallel group; nothing otherwise. Every rank of the group calls it.
  Status FinalizeGradients();

  // Activation recompute for every block of the stage (transformer_block.h); the results stay
  // bit for bit the same. Set before the first micro-batch. recompute_ns: the time B and BW spent
  // rebuilding, since creation.
  void SetRecompute(Recompute recompute);
  int64_t recompute_ns() const;

  // The sum of squares (double) of the gradient elements OptimizerStep steps (all, or the ZeRO
  // shard); tensors replicated over the tensor-parallel group (norm gains, tp > 1) only when
  // `count_replicated`. ScaleGradients multiplies the gradients by `factor` (clipping).
  double GradientSquareSum(bool count_replicated) const;
  // Tied embeddings: the gradient of the embedding (its stage) or of the head's copy (a head stage
  // without the embedding), to be summed over the embedding group; empty otherwise or released.
  std::span<float> TiedEmbeddingGradient();
  bool TiedHeadCopy() const { return config_.tied_embeddings && shard_.has_head && !shard_.has_embedding; }
  void ScaleGradients(float factor);
  // ZeRO-1: keep the AdamW moments of shard `index` of `shards` of the stage's parameters only
  // (ParameterStore::ShardMoments: the flat elements in parameter order, chunked as a
  // reduce-scatter leaves them), so OptimizerStep updates those elements only; the caller brings
  // the gradients of the shard (their mean over the replicas) and gathers the updated values.
  // Before the first step (FAILED_PRECONDITION after); INVALID_ARGUMENT for a bad shard.
  // shard_gradients (ZeRO-2): the gradients are also kept for the shard only, outside a step's
  // span from its first W (or fused backward), which allocates them again (zero), to
  // ReleaseGradients (called at OPT after the data-parallel reduction): they start released.
  Status ShardOptimizerStates(int shards, int index, bool shard_gradients = false);
  // ZeRO-2: the shard's gradients kept, every tensor's gradient freed (nothing without
  // shard_gradients). The optimizer step, the norm and clipping then read the shard's.
  void ReleaseGradients();
  // The flat elements [begin, end) whose moments this stage holds.
  std::pair<int64_t, int64_t> OptimizerShard() const { return {params_.shard_begin(), params_.shard_end()}; }
  // Steps taken so far (AdamW's bias correction uses it); settable to restore a checkpoint.
  int64_t optimizer_steps() const { return optimizer_steps_; }
  void set_optimizer_steps(int64_t steps) { optimizer_steps_ = steps; }

  // Every parameter in model order, with its gradient and AdamW moments (views into buffers
  // the model owns: valid while it lives; write through them to load a checkpoint).
  std::vector<ParameterRef> Parameters() { return params_.Refs(); }
  Result<ParameterRef> FindParameter(std::string_view name);
  // Values, gradients and both moment buffers (a ZeRO shard's, padding included).
  int64_t ParameterBytes() const { return params_.Bytes(); }

  // Bytes saved for micro-batches in flight now (the buffers' sizes: what the model means to keep).
  int64_t ActivationBytes() const;
  int MicroBatchesInFlight() const { return static_cast<int>(in_flight_.size()); }

  const ModelConfig& config() const { return config_; }
  const StageShard& shard() const { return shard_; }
  const BatchShape& batch() const { return batch_; }
  int64_t tokens_per_microbatch() const { return dims_.tokens(); }  // b * s
  // b * s * h, or this rank's 1/tp of the tokens with sequence parallelism: what passes between
  // stages.
  int64_t activation_size() const { return dims_.local_tokens() * dims_.hidden; }
  bool sequence_parallel() const { return dims_.sp; }

 private:
  enum class Phase { kForwardDone, kInputGradDone };
  struct MicroBatch {
    Phase phase = Phase::kForwardDone;
    kernels::HostBuffer<int32_t> tokens;     // embedding ids, until W
    kernels::HostBuffer<float> embed_grad;   // gradient of the embedding output, B to W
    std::vector<BlockSaved<float>> blocks;
    HeadSaved<float> head;
    int64_t Bytes() const;
  };

  StageModel(const ModelConfig& config, const StageShard& shard, const BatchShape& batch,
             worker::parallel::TensorParallel* tp);
  // OK, or the group's first collective error (every call ends with it).
  Status TensorParallelStatus() const;
  void Build();
  Status CheckInput(int mb, const StageInput& input) const;
  // F's arithmetic; keeps what the backward needs in *keep, or nothing when keep is null.
  StageOutput ForwardInto(StageInput input, MicroBatch* keep);
  Result<MicroBatch*> Find(int mb, Phase phase, const char* what);
  // B of the head and blocks (or the fused baseline, which also does W and retires mb).
  Result<kernels::HostBuffer<float>> Backward(int mb, kernels::HostBuffer<float> grad_output, bool fused);
  void EmbeddingWeightGrad(MicroBatch* state);
  // ZeRO-2: allocates the released gradients again (zero) and rebinds them; nothing otherwise.
  void EnsureGradients();

  ModelConfig config_;
  StageShard shard_;
  BatchShape batch_;
  BlockDims dims_;
  ParameterStore params_;
  Parameter* embedding_ = nullptr;
  std::vector<TransformerBlock<float>> blocks_;
  // Each block's nine tensors in BlockTensors' order, and the head's norm and output: where
  // EnsureGradients rebinds the gradients after ZeRO-2 allocated them again.
  std::vector<std::array<Parameter*, 12>> block_params_;  // BlockTensors' order; the biases may be null
  std::array<Parameter*, 2> head_params_{};
  std::optional<LmHead<float>> head_;
  std::map<int, MicroBatch> in_flight_;
  worker::parallel::TensorParallel* tp_ = nullptr;
  int64_t optimizer_steps_ = 0;
};

}  // namespace pipecoord::model

#endif  // PIPECOORD_WORKER_MODEL_STAGE_MODEL_H_
