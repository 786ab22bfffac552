// Parameters and the states training keeps for them: gradients, fp32 master weights and
// optimizer moments, per rank, with ZeRO sharding over the data-parallel group.
#ifndef PIPECOORD_MEMORY_PARAM_STATES_H_
#define PIPECOORD_MEMORY_PARAM_STATES_H_

#include <cstdint>

#include "memory/model_spec.h"
#include "memory/training_spec.h"

namespace pipecoord::memory {

// Parameter counts held by one tensor-parallel rank. Column-parallel weights and biases
// (QKV, fc1/gate/up) and row-parallel weights (output projection, fc2/down) are divided by t;
// norms and row-parallel biases are replicated; the vocabulary is split into ceil(v/t) rows.
struct ParamCounts {
  int64_t per_block = 0;    // one transformer block
  int64_t embedding = 0;    // word embedding (on the first stage)
  int64_t positions = 0;    // learned position embedding (first stage), replicated over TP
  int64_t final_norm = 0;   // last stage
  int64_t lm_head = 0;      // last stage: its own weights, or the tied embedding's copy
};

ParamCounts CountParams(const ModelSpec& model, int tp);

// The whole model's parameter count (tp 1, tied weights counted once).
int64_t TotalParams(const ModelSpec& model);

// Bytes on one rank for `params` parameters (that rank's TP/PP share), after ZeRO sharding
// over dp (each shard rounded up).
struct StateBytes {
  int64_t params = 0;     // weights in the policy's dtype; sharded by ZeRO-3
  int64_t grads = 0;      // fp32 (or the weights' dtype); sharded by ZeRO-2 and 3
  int64_t master = 0;     // fp32 master weights (16-bit policies); sharded by ZeRO >= 1
  // With 16-bit gradients, the fp32 copy the optimizer steps from (Megatron keeps one); sharded
  // by ZeRO >= 1. Zero with fp32 gradients.
  int64_t grad_copy = 0;
  int64_t optimizer = 0;  // AdamW m and v (8 bytes) or SGD momentum (4), fp32; ZeRO >= 1
  int64_t total() const { return params + grads + master + grad_copy + optimizer; }
  int64_t optimizer_side() const { return master + grad_copy + optimizer; }  // "optimizer states"
};

StateBytes ParamStateBytes(int64_t params, const TrainingSpec& training);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_PARAM_STATES_H_
