// Memory budget per rank: what a healthy rank's reported peak stays under. It counts what the
// rank's backend allocates and reports, nothing more, and takes every byte from memory/'s
// recipe for that backend: there is no formula of its own here.
//
// Device "cpu" (worker/model): the `pipecoord-cpu` recipe (memory/pipecoord_cpu_recipe.cc,
// memory/pipecoord_cpu.h).
//   parameters: memory/'s parameter count of the stage's blocks, embedding and head, at the
//     fp32 policy's 16 B each (values, gradients, AdamW's two moments); under ZeRO-1 the
//     moments of ceil(n / dp) of the stage's n parameters (the worker's padded shard); under
//     ZeRO-2 the gradients of that shard too, replaced by the whole gradients (4 n) from the
//     stage's first W or BW of the step (which allocates them) to OPT: the walk below adds the
//     difference there;
//   activations: the most bytes the rank's micro-batches in flight hold at once, over all the
//     stages it holds (the peak of the rank's total, as the CPU backend measures it: a V-shaped
//     rank's two chunks peak at different moments, so this is less than the sum of their peaks).
// A micro-batch holds one of two amounts on a stage (SavedBytes): from its F to its B what F
// saved (the recipe's stored bytes), from its B to its W what B keeps for W (the recipe's
// w_bytes: more than F saved when the attention probabilities are smaller than 4h per token,
// since W needs the gradients of every weight-carrying op). The peak is found by walking the
// rank's job list in order, as the executor runs it, noting the rank's total after each F and
// each B (BW: after its B half), where the backend notes its peak; W only frees.
//
// Device "cuda" (worker/cuda): the `pipecoord-cuda` recipe with the spec's precision
// (memory/pipecoord_cuda_recipe.cc, memory/pipecoord_cuda.h), in the caching pool's bytes (each
// tensor rounded up to 512 B), since the backend reports the pool's allocated bytes and their
// peak. The pool sees more than the saved tensors, and the budget counts all of it:
//   parameters: per weight tensor its fp32 master, gradient and AdamW moments (16 B a
//     parameter), in bf16 also the bf16 copy (18 B), each rounded;
//   constants: each stage's RoPE cos and sin tables (with blocks) and loss accumulator (head);
//   activations: the same walk, where an op's peak is the most it holds during the op (B's
//     transients: dz, dout, flash attention's delta; the head F's loss scalar), and the tensors
//     passed between stages count where the executor holds them: an output from its F or B
//     until its SEND (or, for a stage on the same rank, until the F or B that reads it), an
//     input from the F or B that receives it (it is then kept as that op's saved input); OPT's
//     own allocations (the data-parallel ring's chunks, the norm's scratch, ZeRO-2's release).
// This is exact for the executor with a transport that lets go of a sent tensor when Send
// returns and allocates a received one in the pool when Recv returns
// (worker/cuda/memory_budget_cuda_test's). The workers' transports allocate received tensors
// the same way but hold a sent one longer: StagedTransport until its copy to pinned memory has
// run on the GPU, NcclTransport until the peer took it off the link. Those depend on timing, so
// both hand the sent tensor off (kernels::Tensor::HandOffToTransport): its bytes leave the
// pool's owned count (CachingAllocator's owned_bytes, allocated minus handed-off blocks), and
// the peak the CUDA backend reports is the owned peak, which such a transport leaves where the
// budget puts it (memory_budget_cuda_test's MemoryBudgetHeldSendsTest). Not counted either way:
// a payload NCCL receives early, before its Recv. The pool's large blocks (over 1 MiB) are counted at
// their 512-rounded size, exact when their sizes are multiples of 2 MiB (memory/pipecoord_cuda.h).
// Not in the pool and not in the budget: the cuBLASLt workspace (32 MiB per device,
// memory::kCublasLtWorkspaceBytes), the launchers' cudaMallocAsync scratch (cross-entropy's row
// losses, the embedding backward's sort arrays) and the CUDA context.
//
// The result does not depend on timing, so a healthy rank reports exactly its budget: anything
// above is memory the plan does not know about (worker/daemon/memory_budget_run_test checks
// budget == measured peak on every rank of every schedule family on the CPU backend,
// worker/cuda/memory_budget_cuda_test on the CUDA backend).
#ifndef PIPECOORD_JOBPLAN_MEMORY_BUDGET_H_
#define PIPECOORD_JOBPLAN_MEMORY_BUDGET_H_

#include <cstdint>
#include <vector>

#include "proto/job.pb.h"

namespace pipecoord::jobplan {

// What one micro-batch holds on one stage, by phase, in bytes (pool bytes on cuda).
struct SavedBytes {
  uint64_t after_f = 0;  // from its F to its B
  uint64_t after_b = 0;  // from its B to its W
};

struct RankMemoryEstimate {
  uint64_t parameter_bytes = 0;   // values + gradients + two moments (+ bf16 copies on cuda)
  uint64_t constant_bytes = 0;    // cuda: RoPE tables, loss accumulators, replay hashes; 0 on the CPU
  // The most held at once above those, over the rank's stages (ZeRO-2: with the stages' whole
  // gradients, held from each one's first W or BW of a step to OPT, where they are held).
  uint64_t activation_bytes = 0;
  uint64_t budget_bytes = 0;      // the sum of the three
};

// One micro-batch on `shard`, from the spec's device's recipe. `spec` has passed WithDefaults.
SavedBytes StageSavedBytes(const v1::JobSpec& spec, const v1::StageShard& shard);

// One estimate per pipeline rank. `spec` has passed WithDefaults; `plan` holds shards and jobs.
std::vector<RankMemoryEstimate> EstimateRankMemory(const v1::JobSpec& spec, const v1::Plan& plan);

// Sets plan->memory_budget_bytes from EstimateRankMemory.
void FillMemoryBudgets(const v1::JobSpec& spec, v1::Plan* plan);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_MEMORY_BUDGET_H_
