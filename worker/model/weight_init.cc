#include "worker/model/weight_init.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/rng.h"

namespace pipecoord::model {

uint64_t TensorSeed(uint64_t model_seed, std::string_view name) {
  return kernels::cpu::CombineSeeds(model_seed, kernels::cpu::HashString(name));
}

void InitUniform(std::span<float> out, uint64_t model_seed, std::string_view name, double std) {
  kernels::cpu::Rng rng(TensorSeed(model_seed, name));
  const double a = std::sqrt(3.0) * std;
  rng.FillUniform(out.data(), static_cast<int64_t>(out.size()), -a, a);
}

}  // namespace pipecoord::model
