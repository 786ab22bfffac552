// Generates the op-level programs of one transformer block, one micro-batch, on one rank, so
// the liveness simulator and the analytic model can be compared side by side.
#ifndef PIPECOORD_MEMORY_BLOCK_PROGRAM_H_
#define PIPECOORD_MEMORY_BLOCK_PROGRAM_H_

#include "common/status.h"
#include "memory/model_spec.h"
#include "memory/program.h"
#include "memory/training_spec.h"

namespace pipecoord::memory {

// Programs, in order: "forward"; "recompute" (only with recompute selective or full: the
// forward ops whose outputs backward needs, run again); "backward_input" (B: input gradients
// and the norms' weight gradients); "backward_weight" (W: the four linear layers' weight
// gradients, accumulated into persistable fp32 buffers). Ops follow Megatron-LM's block (the
// `megatron` recipe): fused norms, fused QKV, flash or eager attention, the unfused SwiGLU
// of get_training_info's Megatron, bias-dropout-add; tensors the recipe lists carry the
// recipe's names as ids. The block input "input_norm.input" and the incoming gradient
// "grad.block_output" are inputs of the set; "block.output" and "grad.block_input" are kept.
// With sequence parallelism (tp > 1) the tensors outside the TP regions hold s/tp of the
// sequence: each region starts with an all-gather into a transient full-sequence tensor and
// ends with a reduce-scatter, in B and W too, so only the shards stay alive (Korthikanti et al.
// 2022, section 4.2.2).
Result<ProgramSet> TransformerBlockProgram(const ModelSpec& model, const TrainingSpec& training);

// Bytes of the tensor a block hands on ("block.output" forward, "grad.block_input" backward):
// s x b x h in the activation dtype, a sequence shard of it under sequence parallelism.
int64_t BlockBoundaryBytes(const ModelSpec& model, const TrainingSpec& training);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_BLOCK_PROGRAM_H_
