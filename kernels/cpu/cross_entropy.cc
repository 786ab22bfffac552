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

template <typename T>
void VocabParallelRowMax(const T* logits, int64_t n, int64_t vl, float* mine) {
  for (int64_t r = 0; r < n; ++r) {
    const T* row = logits + r * vl;
    T m = vl > 0 ? row[0] : static_cast<T>(-INFINITY);
    for (int64_t c = 1; c < vl; ++c) m = std::max(m, row[c]);
    mine[r] = static_cast<float>(m);
  }
}

template <typename T>
void VocabParallelSums(const T* logits, const int32_t* targets, int64_t n, int64_t vl, int64_t first,
                       const float* gathered_max, int tp, float* row_max, float* sums) {
  for (int64_t r = 0; r < n; ++r) {
    float m = gathered_max[r];
    for (int k = 1; k < tp; ++k) m = std::max(m, gathered_max[k * n + r]);
    row_max[r] = m;
    const T* row = logits + r * vl;
    const int64_t t = targets[r] - first;
    double others = 0;
    for (int64_t c = 0; c < vl; ++c) {
      if (c != t) others += std::exp(static_cast<double>(row[c]) - m);
    }
    sums[r] = static_cast<float>(others);
    sums[n + r] = t >= 0 && t < vl ? static_cast<float>(row[t]) : 0.f;
  }
}

template <typename T>
double VocabParallelLossAndProbs(T* logits, int64_t n, int64_t vl, int64_t first, const int32_t* targets,
                                 const float* row_max, const float* sums) {
  double total = 0;
  for (int64_t r = 0; r < n; ++r) {
    const double others = sums[r], e_target = std::exp(static_cast<double>(sums[n + r]) - row_max[r]);
    const double sum = e_target + others;
    total += std::log1p(others / e_target);
    T* row = logits + r * vl;
    const int64_t t = targets[r] - first;
    for (int64_t c = 0; c < vl; ++c) {
      row[c] = static_cast<T>(c == t ? -others / sum : std::exp(static_cast<double>(row[c]) - row_max[r]) / sum);
    }
  }
  return n > 0 ? total / static_cast<double>(n) : 0.0;
}

template <typename T>
void VocabParallelDlogits(const T* probs, int64_t n, int64_t vl, double dloss, T* dlogits) {
  const double scale = dloss / static_cast<double>(n);
  for (int64_t i = 0; i < n * vl; ++i) dlogits[i] = static_cast<T>(scale * static_cast<double>(probs[i]));
}

#define PIPECOORD_VOCAB_PARALLEL(T)                                                                          \
  template void VocabParallelRowMax<T>(const T*, int64_t, int64_t, float*);                                \
  template void VocabParallelSums<T>(const T*, const int32_t*, int64_t, int64_t, int64_t, const float*, int, \
                                     float*, float*);                                                      \
  template double VocabParallelLossAndProbs<T>(T*, int64_t, int64_t, int64_t, const int32_t*, const float*, \
                                               const float*);                                              \
  template void VocabParallelDlogits<T>(const T*, int64_t, int64_t, double, T*);
PIPECOORD_VOCAB_PARALLEL(float)
PIPECOORD_VOCAB_PARALLEL(double)
#undef PIPECOORD_VOCAB_PARALLEL

}  // namespace pipecoord::kernels::cpu
