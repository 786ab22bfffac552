#include "kernels/cpu/rms_norm.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/lane_sum.h"
#include "kernels/cpu/linear_reference.h"
#include "kernels/cpu/rms_norm_reference.h"

namespace pipecoord::kernels::cpu {
namespace {

// The fp32 path: the reference's arithmetic (double, each output rounded once), with the row sums
// over lane_sum.h's fixed partial sums so that every loop vectorises; the clones give vector code
// for the CPU the process runs on (picked once, so reruns are bit-identical).
__attribute__((target_clones("avx512f", "avx2", "default"))) void ForwardFloat(
    const float* x, const float* g, float* y, float* rstd, int64_t n, int64_t h, double eps) {
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * h;
    const double ss = LaneSum(h, [&](int64_t i) { return static_cast<double>(xr[i]) * xr[i]; });
    rstd[t] = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(h) + eps));
    const double r = rstd[t];
    float* yr = y + t * h;
    for (int64_t i = 0; i < h; ++i) yr[i] = static_cast<float>(xr[i] * r * g[i]);
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void BackwardInputFloat(
    const float* dy, const float* x, const float* g, const float* rstd, float* dx, int64_t n,
    int64_t h, bool accumulate) {
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * h;
    const float* dyr = dy + t * h;
    float* dxr = dx + t * h;
    const double dot = LaneSum(  // sum_i g_i dy_i x_i
        h, [&](int64_t i) { return static_cast<double>(g[i]) * dyr[i] * xr[i]; });
    const double r = rstd[t];
    const double c = r * r * r * dot / static_cast<double>(h);
    if (accumulate) {
      for (int64_t i = 0; i < h; ++i) {
        dxr[i] = static_cast<float>(dxr[i] + (r * g[i] * dyr[i] - c * xr[i]));
      }
    } else {
      for (int64_t i = 0; i < h; ++i) dxr[i] = static_cast<float>(r * g[i] * dyr[i] - c * xr[i]);
    }
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void BackwardWeightFloat(
    const float* dy, const float* x, const float* rstd, float* dg, int64_t n, int64_t h,
    double* acc) {
  for (int64_t i = 0; i < h; ++i) acc[i] = dg[i];
  for (int64_t t = 0; t < n; ++t) {
    const double r = rstd[t];
    const float* xr = x + t * h;
    const float* dyr = dy + t * h;
    for (int64_t i = 0; i < h; ++i) acc[i] += static_cast<double>(dyr[i]) * xr[i] * r;
  }
  for (int64_t i = 0; i < h; ++i) dg[i] = static_cast<float>(acc[i]);
}

}  // namespace

template <>
void RmsNormForward<float>(const float* x, const float* g, float* y, float* rstd, int64_t n,
                           int64_t h, double eps) {
  if (ReferenceKernelsRequested()) return RmsNormForwardReference(x, g, y, rstd, n, h, eps);
  ForwardFloat(x, g, y, rstd, n, h, eps);
}

template <>
void RmsNormBackwardInput<float>(const float* dy, const float* x, const float* g,
                                 const float* rstd, float* dx, int64_t n, int64_t h,
                                 bool accumulate) {
  if (ReferenceKernelsRequested()) {
    return RmsNormBackwardInputReference(dy, x, g, rstd, dx, n, h, accumulate);
  }
  BackwardInputFloat(dy, x, g, rstd, dx, n, h, accumulate);
}

template <>
void RmsNormBackwardWeight<float>(const float* dy, const float* x, const float* rstd, float* dg,
                                  int64_t n, int64_t h) {
  if (ReferenceKernelsRequested()) return RmsNormBackwardWeightReference(dy, x, rstd, dg, n, h);
  std::vector<double> acc(static_cast<size_t>(h));
  BackwardWeightFloat(dy, x, rstd, dg, n, h, acc.data());
}

template <>
void RmsNormForward<double>(const double* x, const double* g, double* y, double* rstd, int64_t n,
                            int64_t h, double eps) {
  RmsNormForwardReference(x, g, y, rstd, n, h, eps);
}

template <>
void RmsNormBackwardInput<double>(const double* dy, const double* x, const double* g,
                                  const double* rstd, double* dx, int64_t n, int64_t h,
                                  bool accumulate) {
  RmsNormBackwardInputReference(dy, x, g, rstd, dx, n, h, accumulate);
}

template <>
void RmsNormBackwardWeight<double>(const double* dy, const double* x, const double* rstd,
                                   double* dg, int64_t n, int64_t h) {
  RmsNormBackwardWeightReference(dy, x, rstd, dg, n, h);
}

}  // namespace pipecoord::kernels::cpu
