#include "kernels/cpu/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace pipecoord::kernels::cpu {
namespace {

template <typename T>
double Dot(const T* a, const T* b, int64_t n) {
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(a[i]) * b[i];
  return acc;
}

}  // namespace

template <typename T>
void AttentionForwardReference(const T* q, const T* k, const T* v, T* probs, T* o,
                               const AttentionDims& d) {
  const int64_t s = d.seq, hd = d.head_dim, stride = d.hidden(), kv_stride = d.kv_hidden();
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<double> score(static_cast<size_t>(s)), acc(static_cast<size_t>(hd));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t base = b * s * stride + h * hd;  // row 0 of this (sample, head)
      const int64_t kv = b * s * kv_stride + (h / d.group()) * hd;  // of its key/value head
      T* p = probs + (b * d.heads + h) * s * s;
      for (int64_t i = 0; i < s; ++i) {
        const T* qi = q + base + i * stride;
        const int64_t lo = d.first_key(i);
        double mx = -INFINITY;
        for (int64_t j = lo; j <= i; ++j) {
          score[j] = scale * Dot(qi, k + kv + j * kv_stride, hd);
          mx = std::max(mx, score[j]);
        }
        double sum = 0;
        for (int64_t j = lo; j <= i; ++j) {
          score[j] = std::exp(score[j] - mx);
          sum += score[j];
        }
        T* pi = p + i * s;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < lo; ++j) pi[j] = 0;
        for (int64_t j = lo; j <= i; ++j) {
          pi[j] = static_cast<T>(score[j] / sum);
          const double pij = pi[j];
          const T* vj = v + kv + j * kv_stride;
          for (int64_t c = 0; c < hd; ++c) acc[c] += pij * vj[c];
        }
        for (int64_t j = i + 1; j < s; ++j) pi[j] = 0;
        T* oi = o + base + i * stride;
        for (int64_t c = 0; c < hd; ++c) oi[c] = static_cast<T>(acc[c]);
      }
    }
  }
}

template <typename T>
void AttentionBackwardReference(const T* dout, const T* q, const T* k, const T* v, const T* probs,
                                T* dq, T* dk, T* dv, const AttentionDims& d) {
  const int64_t s = d.seq, hd = d.head_dim, stride = d.hidden(), kv_stride = d.kv_hidden();
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<double> ds(static_cast<size_t>(s)), dqi(static_cast<size_t>(hd));
  std::vector<double> dk_acc(static_cast<size_t>(s * hd)), dv_acc(static_cast<size_t>(s * hd));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t base = b * s * stride + h * hd;
      const int64_t kv = b * s * kv_stride + (h / d.group()) * hd;
      const T* p = probs + (b * d.heads + h) * s * s;
      // dk and dv sum over the key/value head's group of query heads, in double, rounded once.
      if (h % d.group() == 0) {
        std::fill(dk_acc.begin(), dk_acc.end(), 0.0);
        std::fill(dv_acc.begin(), dv_acc.end(), 0.0);
      }
      for (int64_t i = 0; i < s; ++i) {
        const T* pi = p + i * s;
        const T* doi = dout + base + i * stride;
        const T* qi = q + base + i * stride;
        // dP_ij = do_i . v_j; dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij').
        const int64_t lo = d.first_key(i);
        double row = 0;
        for (int64_t j = lo; j <= i; ++j) {
          ds[j] = Dot(doi, v + kv + j * kv_stride, hd);
          row += pi[j] * ds[j];
        }
        std::fill(dqi.begin(), dqi.end(), 0.0);
        for (int64_t j = lo; j <= i; ++j) {
          const double pij = pi[j];
          const double g = pij * (ds[j] - row) * scale;
          const T* kj = k + kv + j * kv_stride;
          double* dkj = dk_acc.data() + j * hd;
          double* dvj = dv_acc.data() + j * hd;
          for (int64_t c = 0; c < hd; ++c) {
            dqi[c] += g * kj[c];
            dkj[c] += g * qi[c];
            dvj[c] += pij * doi[c];
          }
        }
        T* dq_row = dq + base + i * stride;
        for (int64_t c = 0; c < hd; ++c) dq_row[c] = static_cast<T>(dqi[c]);
      }
      if (h % d.group() != d.group() - 1) continue;  // the group's last head writes its sums
      for (int64_t j = 0; j < s; ++j) {
        T* dk_row = dk + kv + j * kv_stride;
        T* dv_row = dv + kv + j * kv_stride;
        for (int64_t c = 0; c < hd; ++c) {
          dk_row[c] = static_cast<T>(dk_acc[j * hd + c]);
          dv_row[c] = static_cast<T>(dv_acc[j * hd + c]);
        }
      }
    }
  }
}

template void AttentionForwardReference<float>(const float*, const float*, const float*, float*,
                                               float*, const AttentionDims&);
template void AttentionForwardReference<double>(const double*, const double*, const double*,
                                                double*, double*, const AttentionDims&);
template void AttentionBackwardReference<float>(const float*, const float*, const float*,
                                                const float*, const float*, float*, float*, float*,
                                                const AttentionDims&);
template void AttentionBackwardReference<double>(const double*, const double*, const double*,
                                                 const double*, const double*, double*, double*,
                                                 double*, const AttentionDims&);

}  // namespace pipecoord::kernels::cpu
