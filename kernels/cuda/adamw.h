// Multi-tensor AdamW on the GPU: the twin of kernels/cpu/adamw.h (PyTorch's torch.optim.AdamW:
// decoupled weight decay, bias correction), one launch over a list of parameter tensors.
//
// Every tensor has fp32 master weights, gradient and states (m, v); optionally the model's bf16
// copy of the weights is rewritten from the updated master in the same pass. Each element's
// update runs in double with the CPU twin's operations in the CPU twin's order, each rounded
// as IEEE double (no fused multiply-adds), and is rounded once per buffer: the same arithmetic
// as kernels/cpu/adamw.cc. Device pointers; no two tensors' buffers may overlap.
#ifndef PIPECOORD_KERNELS_CUDA_ADAMW_H_
#define PIPECOORD_KERNELS_CUDA_ADAMW_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "common/status.h"
#include "kernels/cuda/bf16.h"

namespace pipecoord::kernels::cuda {

// The hyper-parameters of cpu::AdamWOptions (same meaning and defaults).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;  // decoupled: p *= 1 - lr * weight_decay before the Adam update
};

// One parameter tensor of n elements.
struct AdamWTensor {
  float* param = nullptr;              // fp32 master weights, updated in place
  const float* grad = nullptr;         // read only
  float* m = nullptr;                  // first moment, updated in place
  float* v = nullptr;                  // second moment, updated in place
  __nv_bfloat16* param_bf16 = nullptr;  // optional: overwritten with bf16(updated param)
  int64_t n = 0;
  bool weight_decay = true;  // false: this tensor takes no decay (as StageModel's norm gains)
};

// The most tensors one kernel launch carries (its argument block stays under CUDA's 4 KiB
// limit); longer lists take ceil(size / kMaxAdamWTensorsPerLaunch) launches.
inline constexpr int kMaxAdamWTensorsPerLaunch = 48;

// One step on every tensor; step counts from 1 (the first update uses step = 1):
//   p *= 1 - lr wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   p -= lr * (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps).
Status MultiTensorAdamWStep(std::span<const AdamWTensor> tensors, const AdamWOptions& options,
                            int64_t step, cudaStream_t stream);

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_ADAMW_H_
