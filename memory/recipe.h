// Activation recipes: which tensors a transformer block saves for its backward, as data.
//
// A recipe is a list of named tensors, each with a shape made of formulas over s, b, h, f, a,
// g, v (see formula.h), an element type and the way tensor/sequence parallelism splits it.
// Conditions select the entries that apply to a model ("attention=flash", "mlp=swiglu",
// "dropout"), so one recipe covers a framework's variants. Nothing here computes; see
// activations.h for the resolution against a model and a training spec.
#ifndef PIPECOORD_MEMORY_RECIPE_H_
#define PIPECOORD_MEMORY_RECIPE_H_

#include <array>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pipecoord::memory {

// kAct: the policy's activation dtype (2 or 4 bytes); kI32: 32-bit integers (token ids).
enum class ElemType { kAct, kFp32, kU8, kI32 };

// tp_dim value for tensors outside the tensor-parallel regions: replicated over the TP group,
// or split along their first dimension (s) when sequence parallelism is on.
inline constexpr int kSeqSplit = -1;
// tp_dim value for tensors every rank of the TP group holds whole even with sequence
// parallelism (e.g. token ids a vocabulary-parallel embedding or loss reads for every token).
inline constexpr int kWholeOnEveryRank = -2;

enum TensorFlag : unsigned {
  kSelective = 1u,    // dropped, and recomputed in backward, by selective recompute
  kWeightInput = 2u,  // read by the weight-gradient pass (W): kept from B until W
};

struct RecipeTensor {
  const char* name;   // "attention.q"
  const char* group;  // the block part it belongs to: "input_norm", "attention", "mlp", ...
  const char* why;    // which op saves it, for the report
  std::array<const char*, 4> shape;  // dimension formulas; unused trailing ones are nullptr
  ElemType type;
  int tp_dim;         // the dimension tensor parallelism divides by t, or kSeqSplit
  const char* when;   // comma-separated conditions that must all hold; "" always
  unsigned flags;     // TensorFlag bits
};

struct Recipe {
  const char* name;
  const char* summary;
  std::vector<RecipeTensor> layer;            // one block's forward keeps these for backward
  std::vector<RecipeTensor> full_recompute;   // what a block keeps under full recompute
  std::vector<RecipeTensor> w_grads;          // created by B, kept until W (split backward)
  std::vector<RecipeTensor> first_stage;      // embedding extras, per micro-batch
  std::vector<RecipeTensor> first_stage_w_grads;
  std::vector<RecipeTensor> last_stage;       // final norm, LM head and loss, per micro-batch
  std::vector<RecipeTensor> last_stage_w_grads;
  std::vector<RecipeTensor> last_stage_transient;  // alive only while the loss runs
};

// The shipped recipes, and lookup by name (NOT_FOUND lists the known names).
const std::vector<const Recipe*>& AllRecipes();
Result<const Recipe*> FindRecipe(std::string_view name);

// Megatron-LM with fused kernels (megatron_recipe.cc), framework eager ops as in Hugging
// Face / PaddleNLP Llama (eager_recipe.cc), pipecoord's own fp32 CPU StageModel
// (pipecoord_cpu_recipe.cc) and its CUDA CudaStageModel in fp32 or bf16
// (pipecoord_cuda_recipe.cc); jobplan's per-rank memory budgets come from the last two.
const Recipe& MegatronRecipe();
const Recipe& EagerRecipe();
const Recipe& PipecoordCpuRecipe();
const Recipe& PipecoordCudaRecipe();

// Conditions a `when` may name: attention=eager|flash, mlp=swiglu|gelu,
// norm=rmsnorm|layernorm, dropout, nodropout.
inline constexpr std::string_view kKnownConditions =
    "attention=eager, attention=flash, mlp=swiglu, mlp=gelu, norm=rmsnorm, norm=layernorm, "
    "dropout, nodropout";

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_RECIPE_H_
