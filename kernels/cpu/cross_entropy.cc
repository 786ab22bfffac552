#include "kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>

namespace pipecoord::kernels::cpu {
namespace {

template <typename T>
double RowMax(const T* row, int64_t vocab) {
  double mx = row[0];
  for (int64_t c = 1; c < vocab; ++c) mx = std::max(mx, static_cast<double>(row[c]));
  return mx;
}

}  // namespace

template <typename T>
double CrossEntropyForward(const T* logits, const int32_t* targets, int64_t n, int64_t vocab) {
  double total = 0;
  for (int64_t r = 0; r < n; ++r) {
    const T* row = logits + r * vocab;
    const double mx = RowMax(row, vocab);
    double sum = 0;
    for (int64_t c = 0; c < vocab; ++c) sum += std::exp(row[c] - mx);
    total += mx + std::log(sum) - row[targets[r]];
  }
  return n > 0 ? total / static_cast<double>(n) : 0.0;
}

template <typename T>
void CrossEntropyBackward(const T* logits, const int32_t* targets, int64_t n, int64_t vocab,
                          double dloss, T* dlogits) {
  const double scale = dloss / static_cast<double>(n);
  for (int64_t r = 0; r < n; ++r) {
    const T* row = logits + r * vocab;
    T* drow = dlogits + r * vocab;
    const double mx = RowMax(row, vocab);
    double sum = 0;
    for (int64_t c = 0; c < vocab; ++c) sum += std::exp(row[c] - mx);
    for (int64_t c = 0; c < vocab; ++c) {
      const double p = std::exp(row[c] - mx) / sum;
      drow[c] = static_cast<T>(scale * (p - (c == targets[r] ? 1.0 : 0.0)));
    }
  }
}

template double CrossEntropyForward<float>(const float*, const int32_t*, int64_t, int64_t);
template double CrossEntropyForward<double>(const double*, const int32_t*, int64_t, int64_t);
template void CrossEntropyBackward<float>(const float*, const int32_t*, int64_t, int64_t, double,
                                          float*);
template void CrossEntropyBackward<double>(const double*, const int32_t*, int64_t, int64_t,
                                           double, double*);

}  // namespace pipecoord::kernels::cpu
