// Multi-tensor AdamW: the tensor list travels in the kernel's argument block; each block
// updates one chunk of one tensor.
#include "kernels/cuda/adamw.h"

#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.h"

namespace pipecoord::kernels::cuda {
namespace {

constexpr int kThreads = 256;
// Elements per block: each thread updates kChunk / kThreads of them.
constexpr int64_t kChunk = 8192;

struct LaunchTensor {
  float* param;
  const float* grad;
  float* m;
  float* v;
  __nv_bfloat16* param_bf16;
  int64_t n;
  double decay;         // 1 - lr * weight_decay, or 1 for a tensor without decay
  int64_t first_chunk;  // the first block index of this tensor within the launch
};

// Passed by value: lives in the kernel's constant parameter space.
struct LaunchArgs {
  LaunchTensor tensors[kMaxAdamWTensorsPerLaunch];
  int count;
  double lr, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, bias_correction1,
      bias_correction2;
};
static_assert(sizeof(LaunchArgs) <= 4000, "kernel arguments must stay under 4 KiB");

// The operations and their order are kernels/cpu/adamw.cc's; the _rn intrinsics keep nvcc
// from fusing a multiply and an add into one rounding, so each step rounds as the CPU's does.
__global__ void MultiTensorAdamWKernel(__grid_constant__ const LaunchArgs args) {
  const int64_t block = blockIdx.x;
  int t = 0;
  while (t + 1 < args.count && args.tensors[t + 1].first_chunk <= block) ++t;
  const LaunchTensor& tensor = args.tensors[t];
  const int64_t begin = (block - tensor.first_chunk) * kChunk;
  const int64_t end = min(begin + kChunk, tensor.n);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double g = tensor.grad[i];
    const double mi = __dadd_rn(__dmul_rn(args.beta1, static_cast<double>(tensor.m[i])),
                                __dmul_rn(args.one_minus_beta1, g));
    const double vi =
        __dadd_rn(__dmul_rn(args.beta2, static_cast<double>(tensor.v[i])),
                  __dmul_rn(__dmul_rn(args.one_minus_beta2, g), g));
    tensor.m[i] = __double2float_rn(mi);
    tensor.v[i] = __double2float_rn(vi);
    const double p = __dmul_rn(static_cast<double>(tensor.param[i]), tensor.decay);
    const double step = __ddiv_rn(__dmul_rn(args.lr, __ddiv_rn(mi, args.bias_correction1)),
                                  __dadd_rn(__dsqrt_rn(__ddiv_rn(vi, args.bias_correction2)),
                                            args.eps));
    const float updated = __double2float_rn(__dsub_rn(p, step));
    tensor.param[i] = updated;
    if (tensor.param_bf16 != nullptr) tensor.param_bf16[i] = __float2bfloat16_rn(updated);
  }
}

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
