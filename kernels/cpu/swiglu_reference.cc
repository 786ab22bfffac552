#include "kernels/cpu/swiglu_reference.h"

#include <cmath>

namespace pipecoord::kernels::cpu {
namespace {

double Sigmoid(double u) { return 1.0 / (1.0 + std::exp(-u)); }

}  // namespace

template <typename T>
void SwiGluForwardReference(const T* gate, const T* up, T* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double u = gate[i];
    z[i] = static_cast<T>(u * Sigmoid(u) * up[i]);
  }
}

template <typename T>
void SwiGluBackwardReference(const T* dz, const T* gate, const T* up, T* dgate, T* dup,
                             int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double u = gate[i];
    const double sg = Sigmoid(u);
    const double g = dz[i];
    dgate[i] = static_cast<T>(g * up[i] * sg * (1.0 + u * (1.0 - sg)));
    dup[i] = static_cast<T>(g * u * sg);
  }
}

template void SwiGluForwardReference<float>(const float*, const float*, float*, int64_t);
template void SwiGluForwardReference<double>(const double*, const double*, double*, int64_t);
template void SwiGluBackwardReference<float>(const float*, const float*, const float*, float*,
                                             float*, int64_t);
template void SwiGluBackwardReference<double>(const double*, const double*, const double*,
                                              double*, double*, int64_t);

}  // namespace pipecoord::kernels::cpu
