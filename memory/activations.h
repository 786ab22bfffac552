// Activations: a recipe resolved against a model and a training spec, in bytes on one rank.
#ifndef PIPECOORD_MEMORY_ACTIVATIONS_H_
#define PIPECOORD_MEMORY_ACTIVATIONS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "memory/model_spec.h"
#include "memory/recipe.h"
#include "memory/training_spec.h"

namespace pipecoord::memory {

// One recipe entry on one rank: its shape after the TP/SP splits and its size.
struct ResolvedTensor {
  std::string name, group, why;
  std::vector<int64_t> shape;
  std::string dtype;  // "bf16", "fp16", "fp32", "u8"
  int64_t bytes = 0;
  unsigned flags = 0;  // TensorFlag bits
};

// True when every comma-separated condition of `when` holds for `model`; INVALID_ARGUMENT
// names an unknown condition.
Result<bool> ConditionsHold(std::string_view when, const ModelSpec& model);

// The entries of `tensors` whose conditions hold, evaluated for the spec's micro-batch size.
// A tensor-parallel dimension is divided by t (rounded up: a vocabulary that t does not divide
// is padded, as Megatron does); with sequence parallelism, a kSeqSplit tensor's first dimension
// (s) is divided by t. Errors name the entry and its formula.
Result<std::vector<ResolvedTensor>> ResolveTensors(const std::vector<RecipeTensor>& tensors,
                                                   const ModelSpec& model,
                                                   const TrainingSpec& training);

// One transformer block, one micro-batch, on one rank.
struct BlockActivations {
  std::vector<ResolvedTensor> saved;    // what forward saves with no recompute
  std::vector<ResolvedTensor> kept;     // what forward keeps under the spec's recompute
  std::vector<ResolvedTensor> w_grads;  // what B creates for W
  int64_t saved_bytes = 0;      // sum of `saved`
  int64_t stored_bytes = 0;     // sum of `kept`: what F adds to the live set
  int64_t w_bytes = 0;          // kept from B until W: the W inputs (recomputed if need be) + w_grads
  int64_t recompute_bytes = 0;  // rebuilt during B by recompute, alive while B runs
};

// The first stage's embedding or the last stage's head, one micro-batch, on one rank.
struct EdgeActivations {
  std::vector<ResolvedTensor> tensors;
  std::vector<ResolvedTensor> transient;
  int64_t stored_bytes = 0;
  int64_t w_bytes = 0;
  int64_t transient_bytes = 0;
};

struct ActivationModel {
  const Recipe* recipe = nullptr;
  BlockActivations block;
  EdgeActivations first;  // on the rank holding virtual stage 0
  EdgeActivations last;   // on the rank holding the last virtual stage
};

// Resolves training.recipe. Errors: an unknown recipe (NOT_FOUND), a formula that does not
// divide (INVALID_ARGUMENT naming the entry). Expects ValidateModel/ValidateTraining passed.
Result<ActivationModel> ResolveActivations(const ModelSpec& model, const TrainingSpec& training);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_ACTIVATIONS_H_
