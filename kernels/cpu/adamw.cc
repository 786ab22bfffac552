#include "kernels/cpu/adamw.h"

#include <cmath>

namespace pipecoord::kernels::cpu {

template <typename T>
void AdamWStep(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWOptions& opt,
               int64_t step) {
  const double t = static_cast<double>(step);
  const double bc1 = 1.0 - std::pow(opt.beta1, t);
  const double bc2 = 1.0 - std::pow(opt.beta2, t);
  const double decay = 1.0 - opt.lr * opt.weight_decay;
  for (int64_t i = 0; i < n; ++i) {
    const double g = grad[i];
    const double mi = opt.beta1 * m[i] + (1.0 - opt.beta1) * g;
    const double vi = opt.beta2 * v[i] + (1.0 - opt.beta2) * g * g;
    m[i] = static_cast<T>(mi);
    v[i] = static_cast<T>(vi);
    const double p = param[i] * decay;
    param[i] = static_cast<T>(p - opt.lr * (mi / bc1) / (std::sqrt(vi / bc2) + opt.eps));
  }
}

template void AdamWStep<float>(float*, const float*, float*, float*, int64_t, const AdamWOptions&,
                               int64_t);
template void AdamWStep<double>(double*, const double*, double*, double*, int64_t,
                                const AdamWOptions&, int64_t);

}  // namespace pipecoord::kernels::cpu
