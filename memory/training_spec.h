// TrainingSpec: how the model is trained and split over GPUs, as far as memory cares.
#ifndef PIPECOORD_MEMORY_TRAINING_SPEC_H_
#define PIPECOORD_MEMORY_TRAINING_SPEC_H_

#include <string>
#include <string_view>

#include "common/status.h"
#include "memory/model_spec.h"

namespace pipecoord::memory {

// fp32: everything in fp32. bf16 / fp16: weights and activations in 16 bits, with fp32 master
// weights in the optimizer (and fp32 gradients unless fp32_grads is false).
enum class DtypePolicy { kFp32, kBf16, kFp16 };
enum class Optimizer { kAdamW, kSgd };  // SGD with momentum
enum class Recompute { kNone, kSelective, kFull };

struct TrainingSpec {
  int micro_batch = 1;   // b, samples per micro-batch
  int microbatches = 1;  // m, micro-batches per step (gradient accumulation)
  DtypePolicy dtype = DtypePolicy::kBf16;
  Optimizer optimizer = Optimizer::kAdamW;
  // ZeRO stage over the dp group: 1 shards optimizer states (and master weights) -- Megatron's
  // distributed optimizer --, 2 also gradients, 3 also parameters.
  int zero = 0;
  int dp = 1;
  int tp = 1;
  bool sp = false;  // sequence parallel: the tensors outside the TP regions split along s
  Recompute recompute = Recompute::kNone;
  int pp = 1;
  int vpp = 0;  // chunks per rank; 0: the schedule's default
  std::string schedule = "1f1b";
  std::string recipe = "megatron";  // which tensors a layer saves (see recipe.h)
  // Gradients accumulate in fp32 (Megatron's main_grad; the default for bf16). False: in the
  // weights' dtype. Ignored for fp32.
  bool fp32_grads = true;
};

// Sizes and the rules that tie the spec to the model: tp divides heads, kv_heads and ffn;
// sequence parallel needs tp to divide seq_len; ... Errors name the field and the rule.
// Does not check the schedule (the schedule engine does when it builds one).
Status ValidateTraining(const ModelSpec& model, const TrainingSpec& training);

// Bytes of one weight or activation element under the policy (2 or 4).
int ActivationBytes(DtypePolicy d);

const char* DtypePolicyName(DtypePolicy d);  // "fp32", "bf16", "fp16"
const char* OptimizerName(Optimizer o);      // "adamw", "sgd"
const char* RecomputeName(Recompute r);      // "none", "selective", "full"
Result<DtypePolicy> ParseDtypePolicy(std::string_view text);
Result<Optimizer> ParseOptimizer(std::string_view text);
Result<Recompute> ParseRecompute(std::string_view text);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_TRAINING_SPEC_H_
