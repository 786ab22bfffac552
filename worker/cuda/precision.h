// The two precisions of the CUDA backend.
//
//   fp32: every tensor fp32 (GEMMs in fp32 without TF32): the reference mode, which matches the
//         CPU model to fp32 rounding.
//   bf16: mixed precision: the GEMMs and layer kernels read and write bf16 weights and
//         activations and accumulate in fp32; the optimizer keeps fp32 master weights, fp32
//         gradient buffers (every W adds into them in fp32) and fp32 AdamW moments, and after each
//         step the bf16 weight copies are re-rounded from the masters.
#ifndef PIPECOORD_WORKER_CUDA_PRECISION_H_
#define PIPECOORD_WORKER_CUDA_PRECISION_H_

#include <string_view>

#include "common/status.h"
#include "kernels/tensor.h"

namespace pipecoord::worker::cuda {

enum class Precision { kFp32, kBf16 };

// "fp32", "bf16".
const char* PrecisionName(Precision precision);
// The inverse; "" is fp32 (the default). INVALID_ARGUMENT naming the accepted names otherwise.
Result<Precision> ParsePrecision(std::string_view name);
// The dtype of activations (and of the weights the kernels read): f32 or bf16.
kernels::DType ActivationDType(Precision precision);

}  // namespace pipecoord::worker::cuda

#endif  // PIPECOORD_WORKER_CUDA_PRECISION_H_
