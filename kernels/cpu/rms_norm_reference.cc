#include "kernels/cpu/rms_norm_reference.h"

#include <cmath>
#include <vector>

namespace pipecoord::kernels::cpu {

template <typename T>
void RmsNormForwardReference(const T* x, const T* g, T* y, T* rstd, int64_t n, int64_t h,
                             double eps) {
  for (int64_t t = 0; t < n; ++t) {
    const T* xr = x + t * h;
    double ss = 0;
    for (int64_t i = 0; i < h; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    rstd[t] = static_cast<T>(1.0 / std::sqrt(ss / static_cast<double>(h) + eps));
    const double r = rstd[t];
    T* yr = y + t * h;
    for (int64_t i = 0; i < h; ++i) yr[i] = static_cast<T>(xr[i] * r * g[i]);
  }
}

template <typename T>
void RmsNormBackwardInputReference(const T* dy, const T* x, const T* g, const T* rstd, T* dx,
                                   int64_t n, int64_t h, bool accumulate) {
  for (int64_t t = 0; t < n; ++t) {
    const T* xr = x + t * h;
    const T* dyr = dy + t * h;
    T* dxr = dx + t * h;
    double dot = 0;  // sum_i g_i dy_i x_i
    for (int64_t i = 0; i < h; ++i) dot += static_cast<double>(g[i]) * dyr[i] * xr[i];
    const double r = rstd[t];
    const double c = r * r * r * dot / static_cast<double>(h);
    for (int64_t i = 0; i < h; ++i) {
      const double v = r * g[i] * dyr[i] - c * xr[i];
      dxr[i] = static_cast<T>(accumulate ? dxr[i] + v : v);
    }
  }
}

template <typename T>
void RmsNormBackwardWeightReference(const T* dy, const T* x, const T* rstd, T* dg, int64_t n,
                                    int64_t h) {
  std::vector<double> acc(dg, dg + h);
  for (int64_t t = 0; t < n; ++t) {
    const double r = rstd[t];
    const T* xr = x + t * h;
    const T* dyr = dy + t * h;
    for (int64_t i = 0; i < h; ++i) acc[i] += static_cast<double>(dyr[i]) * xr[i] * r;
  }
  for (int64_t i = 0; i < h; ++i) dg[i] = static_cast<T>(acc[i]);
}

template void RmsNormForwardReference<float>(const float*, const float*, float*, float*, int64_t,
                                             int64_t, double);
template void RmsNormForwardReference<double>(const double*, const double*, double*, double*,
                                              int64_t, int64_t, double);
template void RmsNormBackwardInputReference<float>(const float*, const float*, const float*,
                                                   const float*, float*, int64_t, int64_t, bool);
template void RmsNormBackwardInputReference<double>(const double*, const double*, const double*,
                                                    const double*, double*, int64_t, int64_t, bool);
template void RmsNormBackwardWeightReference<float>(const float*, const float*, const float*,
                                                    float*, int64_t, int64_t);
template void RmsNormBackwardWeightReference<double>(const double*, const double*, const double*,
                                                     double*, int64_t, int64_t);

}  // namespace pipecoord::kernels::cpu
