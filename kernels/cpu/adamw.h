// AdamW (Loshchilov & Hutter): Adam with decoupled weight decay and bias correction, as
// PyTorch's torch.optim.AdamW computes it. State (m, v) and parameters are float; each
// element's update is computed in double and rounded once per buffer.
#ifndef PIPECOORD_KERNELS_CPU_ADAMW_H_
#define PIPECOORD_KERNELS_CPU_ADAMW_H_

#include <cstdint>

namespace pipecoord::kernels::cpu {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;  // decoupled: p *= 1 - lr * weight_decay before the Adam update
};

// One step on n elements; step counts from 1 (the first update uses step = 1):
//   p *= 1 - lr wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   p -= lr * (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps).
// Updates param, m and v in place; grad is read only.
template <typename T>
void AdamWStep(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWOptions& opt,
               int64_t step);

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_ADAMW_H_
