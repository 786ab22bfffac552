// Built-in model presets: llama2-7b/13b/70b, llama3-8b/70b, gpt3-22b/175b.
#ifndef PIPECOORD_MEMORY_PRESETS_H_
#define PIPECOORD_MEMORY_PRESETS_H_

#include <string_view>
#include <vector>

#include "common/status.h"
#include "memory/model_spec.h"

namespace pipecoord::memory {

const std::vector<ModelSpec>& ModelPresets();

// NOT_FOUND lists the known names.
Result<ModelSpec> FindModelPreset(std::string_view name);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_PRESETS_H_
