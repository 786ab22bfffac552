// Multi-tensor AdamW launcher: argument checks, then batches of tensors for the kernel of
// adamw_kernels.h.
#include "kernels/cuda/adamw.h"

#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.h"
#include "kernels/cuda/adamw_kernels.h"

namespace pipecoord::kernels::cuda {
namespace {

using adamw::kChunk;
using adamw::kThreads;
using adamw::LaunchArgs;
using adamw::LaunchTensor;
using adamw::MultiTensorAdamWKernel;

static_assert(adamw::kMaxTensorsPerLaunch == kMaxAdamWTensorsPerLaunch);

Status CheckTensor(size_t index, const AdamWTensor& t) {
  const std::string where = "MultiTensorAdamWStep: tensor " + std::to_string(index);
  if (t.n < 0) return InvalidArgument(where + ": n must be >= 0, got " + std::to_string(t.n));
  if (t.n == 0) return Status::Ok();
  if (t.param == nullptr || t.grad == nullptr || t.m == nullptr || t.v == nullptr) {
    return InvalidArgument(where + ": param, grad, m and v must all be set for " +
                           std::to_string(t.n) + " elements");
  }
  return Status::Ok();
}

}  // namespace

Status MultiTensorAdamWStep(std::span<const AdamWTensor> tensors, const AdamWOptions& options,
                            int64_t step, cudaStream_t stream) {
  if (step < 1) {
    return InvalidArgument("MultiTensorAdamWStep: step counts from 1, got " +
                           std::to_string(step));
  }
  for (size_t i = 0; i < tensors.size(); ++i) PIPECOORD_RETURN_IF_ERROR(CheckTensor(i, tensors[i]));

  // The scalars exactly as cpu::AdamWStep computes them on the host.
  const double t = static_cast<double>(step);
  LaunchArgs args{};
  args.lr = options.lr;
  args.beta1 = options.beta1;
  args.one_minus_beta1 = 1.0 - options.beta1;
  args.beta2 = options.beta2;
  args.one_minus_beta2 = 1.0 - options.beta2;
  args.eps = options.eps;
  args.bias_correction1 = 1.0 - std::pow(options.beta1, t);
  args.bias_correction2 = 1.0 - std::pow(options.beta2, t);
  const double decay = 1.0 - options.lr * options.weight_decay;
  const double no_decay = 1.0 - options.lr * 0.0;

  int64_t chunks = 0;
  auto launch = [&]() -> Status {
    if (args.count == 0) return Status::Ok();
    MultiTensorAdamWKernel<<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(args);
    Status status = LaunchStatus("MultiTensorAdamWKernel");
    args.count = 0;
    chunks = 0;
    return status;
  };
  for (const AdamWTensor& tensor : tensors) {
    if (tensor.n == 0) continue;
    const int64_t tensor_chunks = (tensor.n + kChunk - 1) / kChunk;
    if (args.count == kMaxAdamWTensorsPerLaunch ||
        chunks + tensor_chunks > std::numeric_limits<int32_t>::max()) {
      PIPECOORD_RETURN_IF_ERROR(launch());
    }
    args.tensors[args.count++] =
        LaunchTensor{tensor.param, tensor.grad,  tensor.m,
                     tensor.v,     tensor.param_bf16, tensor.n,
                     tensor.weight_decay ? decay : no_decay, chunks};
    chunks += tensor_chunks;
  }
  return launch();
}

}  // namespace pipecoord::kernels::cuda
