#include "kernels/cpu/linear_reference.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace pipecoord::kernels::cpu {

template <typename T>
void LinearForwardReference(const T* x, const T* w, T* y, const LinearDims& d) {
  // y[t, o] = sum over i = 0, 1, ... of x[t, i] w[o, i], in double. With w transposed once,
  // the sums for all o of a row advance together (a vectorisable axpy over o) while each one
  // still adds its terms in order i = 0, 1, ...: the same arithmetic as one dot product per o.
  std::vector<T> wt(static_cast<size_t>(d.in * d.out));
  for (int64_t o = 0; o < d.out; ++o) {
    for (int64_t i = 0; i < d.in; ++i) wt[i * d.out + o] = w[o * d.in + i];
  }
  std::vector<double> acc(static_cast<size_t>(d.out));
  for (int64_t t = 0; t < d.n; ++t) {
    const T* xr = x + t * d.in;
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t i = 0; i < d.in; ++i) {
      const double xi = xr[i];
      const T* wr = wt.data() + i * d.out;
      for (int64_t o = 0; o < d.out; ++o) acc[o] += xi * wr[o];
    }
    T* yr = y + t * d.out;
    for (int64_t o = 0; o < d.out; ++o) yr[o] = static_cast<T>(acc[o]);
  }
}

template <typename T>
void LinearBackwardInputReference(const T* dy, const T* w, T* dx, const LinearDims& d, bool accumulate) {
  std::vector<double> acc(static_cast<size_t>(d.in));
  for (int64_t t = 0; t < d.n; ++t) {
    T* dxr = dx + t * d.in;
    for (int64_t i = 0; i < d.in; ++i) acc[i] = accumulate ? static_cast<double>(dxr[i]) : 0.0;
    const T* dyr = dy + t * d.out;
    for (int64_t o = 0; o < d.out; ++o) {
      const double g = dyr[o];
      const T* wr = w + o * d.in;
      for (int64_t i = 0; i < d.in; ++i) acc[i] += g * wr[i];
    }
    for (int64_t i = 0; i < d.in; ++i) dxr[i] = static_cast<T>(acc[i]);
  }
}

template <typename T>
void LinearBackwardWeightReference(const T* dy, const T* x, T* dw, const LinearDims& d) {
  std::vector<double> acc(static_cast<size_t>(d.in));
  for (int64_t o = 0; o < d.out; ++o) {
    T* dwr = dw + o * d.in;
    for (int64_t i = 0; i < d.in; ++i) acc[i] = dwr[i];
    for (int64_t t = 0; t < d.n; ++t) {
      const double g = dy[t * d.out + o];
      const T* xr = x + t * d.in;
      for (int64_t i = 0; i < d.in; ++i) acc[i] += g * xr[i];
    }
    for (int64_t i = 0; i < d.in; ++i) dwr[i] = static_cast<T>(acc[i]);
  }
}

template void LinearForwardReference<float>(const float*, const float*, float*, const LinearDims&);
template void LinearForwardReference<double>(const double*, const double*, double*, const LinearDims&);
template void LinearBackwardInputReference<float>(const float*, const float*, float*, const LinearDims&,
                                         bool);
template void LinearBackwardInputReference<double>(const double*, const double*, double*,
                                          const LinearDims&, bool);
template void LinearBackwardWeightReference<float>(const float*, const float*, float*, const LinearDims&);
template void LinearBackwardWeightReference<double>(const double*, const double*, double*,
                                           const LinearDims&);

}  // namespace pipecoord::kernels::cpu
