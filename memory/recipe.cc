#include "memory/recipe.h"

#include <string>

namespace pipecoord::memory {

const std::vector<const Recipe*>& AllRecipes() {
  static const std::vector<const Recipe*> kAll = {&MegatronRecipe(), &EagerRecipe(), &PipecoordCpuRecipe(),
                                                   &PipecoordCudaRecipe()};
  return kAll;
}

Result<const Recipe*> FindRecipe(std::string_view name) {
  std::string known;
  for (const Recipe* r : AllRecipes()) {
    if (name == r->name) return r;
    known += (known.empty() ? "" : ", ") + std::string(r->name);
  }
  return NotFound("recipe: unknown name \"" + std::string(name) + "\" (known: " + known + ")");
}

}  // namespace pipecoord::memory
