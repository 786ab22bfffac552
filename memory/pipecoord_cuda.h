// pipecoord's CUDA backend (worker/cuda) in memory/'s terms: its model and training settings
// for each precision, and one pipeline stage's bytes as the backend's caching pool counts them,
// from the `pipecoord-cuda` recipe (pipecoord_cuda_recipe.cc). jobplan's per-rank memory budgets
// for jobs with device "cuda" are built from these.
//
// The pool (kernels/caching_allocator.h) counts every tensor as a block of whole 512-byte units,
// so each tensor here is rounded on its own before it is added. Its allocated bytes also see
// what the recipe's saved tensors do not: the transients inside B (the gradient of the SwiGLU
// product, the gradient of flash attention's output and its per-row delta), the loss scalar of
// the head's F, the tensors passed between stages, and the stage's constants (RoPE tables, the
// loss accumulator). The per-op timelines below replay cuda_stage_model.cc's allocations and
// frees in its order to find each op's peak.
//
// Exact where every tensor over 1 MiB has a size that is a multiple of 2 MiB (dimensions that are
// multiples of 256 give that): the pool then never hands out a large block bigger than asked.
// Otherwise a large block may exceed its 512-rounded request by up to 1 MiB (a fresh segment
// rounded to 2 MiB, or a cached block whose rest is too small to split off), which this does not
// count. Not in the pool and not counted: the cuBLASLt workspace (kCublasLtWorkspaceBytes per
// device, cudaMalloc), the launchers' scratch (cudaMallocAsync: the cross-entropy's row losses,
// 8 T bytes on the head; the embedding backward's sort arrays, 16 T bytes and cub's temporary),
// the CUDA context, and the NCCL transport's own buffers.
#ifndef PIPECOORD_MEMORY_PIPECOORD_CUDA_H_
#define PIPECOORD_MEMORY_PIPECOORD_CUDA_H_

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "memory/live_peak.h"
#include "memory/model_spec.h"
#include "memory/training_spec.h"

namespace pipecoord::memory {

// The CPU StageModel's block (RMSNorm, g = kv_heads key/value heads (0: a), heads of head_dim
// features (0: hidden / heads), SwiGLU, q/k/v biases when qkv_bias, no dropout, the LM head tied
// to the embedding when tied_embeddings (one tensor on a stage holding both, a copy on a head
// stage without it)) with flash attention.
ModelSpec PipecoordCudaModel(int layers, int64_t hidden, int64_t ffn, int64_t heads, int64_t vocab,
                             int64_t seq_len, int64_t kv_heads = 0, int64_t head_dim = 0, bool qkv_bias = false,
                             bool tied_embeddings = false);

// `precision` is DtypePolicy::kFp32 or kBf16 (JobSpec.precision "fp32" / "bf16"): activations
// in that type; fp32 masters, gradients and AdamW moments (16 B per parameter, 18 B with the
// bf16 copy); with zero >= 1 and dp > 1 (ZeRO-1, the backend's only stage) the moments of a
// 1/dp shard; `recompute` kFull keeps each block's input only and runs its forward again in B;
// kSelective keeps what kNone keeps (flash attention never keeps the s x s probabilities that
// selective recompute drops); `tp` > 1: tensor parallelism (this rank's slices of the weights,
// heads, SwiGLU columns and vocabulary, and the group's sums: see PipecoordCudaStage), with `sp`
// sequence parallelism (the norms, residuals and boundary tensors on 1/tp of the tokens);
// recipe "pipecoord-cuda".
TrainingSpec PipecoordCudaTraining(int micro_batch, DtypePolicy precision, int zero = 0, int dp = 1,
                                   Recompute recompute = Recompute::kNone, int tp = 1, bool sp = false);

// The pool's unit: every allocation is rounded up to a multiple of it.
inline constexpr int64_t kCudaPoolUnit = 512;
int64_t CudaPoolBytes(int64_t bytes);

// GemmOptions::workspace_bytes: one cuBLASLt workspace per CudaDevice, cudaMalloc'd outside the
// pool when the device opens.
inline constexpr int64_t kCublasLtWorkspaceBytes = int64_t{32} << 20;

// One stage holding `layers` blocks, plus the embedding and/or the head. Bytes are pool bytes
// (each tensor rounded) unless said otherwise.
struct CudaStageMemory {
  int64_t parameters = 0;               // count
  int64_t parameter_recipe_bytes = 0;   // 16 or 18 B per parameter, unrounded (param_states.h)
  // master, grad, m, v (and bf16 copy) of each weight tensor; under ZeRO-1 the moments are two
  // flat tensors of the shard, ceil(parameters / dp) elements each (the largest replica's); under
  // ZeRO-2 the gradients too are such a flat tensor (outside a step's backward passes)
  int64_t parameter_bytes = 0;
  // ZeRO-2: the shard's flat gradients (in parameter_bytes), and the whole gradients (a tensor
  // each) that replace them from a step's first W or BW to its OPT, which makes the shard's
  // again before it frees the whole ones; 0 otherwise.
  int64_t shard_gradient_bytes = 0;
  int64_t whole_gradient_bytes = 0;
  // RoPE's cos and sin tables ([s, head_dim / 2] doubles each) with blocks; the loss
  // accumulator (one double) with the head.
  int64_t constant_bytes = 0;
  StageBytes per_microbatch;            // stored after F, kept from B until W
  int64_t boundary_bytes = 0;           // an activation or its gradient [b, s, h] between stages
  // The most the stage holds at once during an op, above what it held before the op: for F,
  // the input received (not on the embedding stage), what F keeps, the loss scalar (head) and
  // the output handed on (not on the head stage); for B (whose start holds what F stored), the
  // gradient received (not on the head stage), B's transients and the gradient handed on (not
  // on the embedding stage). W allocates nothing in the pool: it only frees.
  // Under tensor parallelism the group's sums count too (CudaStageModel's
  // ReduceFromTensorParallel): the ring's chunks (the one read out to send, freed when Send
  // returns, then the one received: the largest, ceil(L / tp) floats, on top of the level), and
  // in bf16 the f32 copy of the whole tensor they run on; and the vocabulary-parallel loss's row
  // maxima of the group, row maxima and sums. With sequence parallelism each row-parallel
  // layer's partial [T, h] before its reduce-scatter, and each gather's [T, h] (f32, then bf16 in
  // bf16) while its layer runs.
  int64_t forward_peak = 0;
  int64_t backward_peak = 0;
  // W above its start (W frees the micro-batch's state): 0 but with sequence parallelism, whose
  // W gathers again the token shards it needs.
  int64_t weight_peak = 0;
};

// Errors: a recipe formula that does not divide (INVALID_ARGUMENT naming the tensor), sizes
// past 64-bit arithmetic; INTERNAL if the op timelines and the recipe disagree on what F or B
// leaves (a timeline out of step with the recipe). Expects ValidateModel / ValidateTraining to
// pass for the two above.
Result<CudaStageMemory> PipecoordCudaStage(const ModelSpec& model, const TrainingSpec& training,
                                           int64_t layers, bool has_embedding, bool has_head);

// Element counts of the stage's weight tensors in the backend's order (per block: two norm
// gains, wq, wk, wv, wo, w1, w2, w3; the embedding; the final norm and the output head), each
// this rank's slice under tensor parallelism (the norm gains whole).
std::vector<int64_t> PipecoordCudaWeightTensors(const ModelSpec& model, int64_t layers,
                                                bool has_embedding, bool has_head, int tp = 1);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_PIPECOORD_CUDA_H_
