// The multi-tensor AdamW kernel (device code) behind adamw.h; adamw.cu fills a LaunchArgs with
// up to kMaxTensorsPerLaunch tensors and launches one block of kThreads per chunk of
// kChunk elements.
//
// nvcc builds it through adamw.cu; g++ builds it under cuda_emulation.h for
// adamw_emulated_test, which runs these very kernels on the CPU.
#ifndef PIPECOORD_KERNELS_CUDA_ADAMW_KERNELS_H_
#define PIPECOORD_KERNELS_CUDA_ADAMW_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/device_math.h"

namespace pipecoord::kernels::cuda::adamw {

// adamw.h's kMaxAdamWTensorsPerLaunch (adamw.cu checks that they agree): tensors per launch.
constexpr int kMaxTensorsPerLaunch = 48;
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
  LaunchTensor tensors[kMaxTensorsPerLaunch];
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

}  // namespace pipecoord::kernels::cuda::adamw

#endif  // PIPECOORD_KERNELS_CUDA_ADAMW_KERNELS_H_
