#include "worker/cuda/precision.h"

#include <string>

namespace pipecoord::worker::cuda {

const char* PrecisionName(Precision precision) {
  return precision == Precision::kBf16 ? "bf16" : "fp32";
}

Result<Precision> ParsePrecision(std::string_view name) {
  if (name.empty() || name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  return InvalidArgument("precision: must be \"fp32\" or \"bf16\", got \"" + std::string(name) + "\"");
}

kernels::DType ActivationDType(Precision precision) {
  return precision == Precision::kBf16 ? kernels::DType::kBF16 : kernels::DType::kF32;
}

}  // namespace pipecoord::worker::cuda
