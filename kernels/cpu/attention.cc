#include "kernels/cpu/attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/cpu/attention_reference.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_reference.h"

namespace pipecoord::kernels::cpu {
namespace {

int Int(int64_t v) { return static_cast<int>(v); }

// One (sample, head)'s rows of q, k, v, o and their gradients start at `base` and lie `hidden`
// floats apart: sgemm reads and writes them in place through its leading dimension.
int64_t HeadBase(const AttentionDims& d, int64_t b, int64_t h) {
  return b * d.seq * d.hidden() + h * d.head_dim;
}

// Row i of p holds the scaled scores s_i0 .. s_i(s-1); leaves softmax over j <= i (the maximum
// subtracted before exp), zeros after. The exp, the sum and the division run in double, in index
// order (deterministic): O(s^2) work beside the sgemms' O(s^2 d), and the probabilities then
// carry the scores' fp32 error and one rounding only (attention_test's bound). e: s scratch values.
void CausalSoftmaxRows(float* p, int64_t s, double* e) {
  for (int64_t i = 0; i < s; ++i) {
    float* row = p + i * s;
    float mx = row[0];
    for (int64_t j = 1; j <= i; ++j) mx = std::max(mx, row[j]);
    double sum = 0;
    for (int64_t j = 0; j <= i; ++j) {
      e[j] = std::exp(static_cast<double>(row[j]) - mx);
      sum += e[j];
    }
    for (int64_t j = 0; j <= i; ++j) row[j] = static_cast<float>(e[j] / sum);
    std::fill(row + i + 1, row + s, 0.0f);
  }
}

// Row i of ds holds dP_i0 .. dP_i(s-1); leaves dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij'), the
// row sum and the product in double, rounded once. P is zero above the diagonal, so is dS.
void SoftmaxBackwardRows(const float* p, float* ds, int64_t s) {
  for (int64_t i = 0; i < s; ++i) {
    const float* pi = p + i * s;
    float* dsi = ds + i * s;
    double row = 0;
    for (int64_t j = 0; j <= i; ++j) row += static_cast<double>(pi[j]) * dsi[j];
    for (int64_t j = 0; j <= i; ++j) {
      dsi[j] = static_cast<float>(pi[j] * (static_cast<double>(dsi[j]) - row));
    }
    std::fill(dsi + i + 1, dsi + s, 0.0f);
  }
}

}  // namespace

template <>
void AttentionForward<float>(const float* q, const float* k, const float* v, float* probs,
                             float* o, const AttentionDims& d) {
  if (ReferenceKernelsRequested()) return AttentionForwardReference(q, k, v, probs, o, d);
  const int64_t s = d.seq, hd = d.head_dim, ld = d.hidden();
  if (s == 0 || hd == 0) return;
  GemmThreads();  // sets OpenBLAS's thread count before the first sgemm
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<double> e(static_cast<size_t>(s));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t base = HeadBase(d, b, h);
      float* p = probs + (b * d.heads + h) * s * s;
      // P [s, s] = scale Q K^T (the whole square; the softmax keeps j <= i).
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int(s), Int(s), Int(hd), scale,
                  q + base, Int(ld), k + base, Int(ld), 0.0f, p, Int(s));
      CausalSoftmaxRows(p, s, e.data());
      // O [s, hd] = P V.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int(s), Int(hd), Int(s), 1.0f, p,
                  Int(s), v + base, Int(ld), 0.0f, o + base, Int(ld));
    }
  }
}

template <>
void AttentionBackward<float>(const float* dout, const float* q, const float* k, const float* v,
                              const float* probs, float* dq, float* dk, float* dv,
                              const AttentionDims& d) {
  if (ReferenceKernelsRequested()) {
    return AttentionBackwardReference(dout, q, k, v, probs, dq, dk, dv, d);
  }
  const int64_t s = d.seq, hd = d.head_dim, ld = d.hidden();
  if (s == 0 || hd == 0) return;
  GemmThreads();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<float> ds(static_cast<size_t>(s * s));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t base = HeadBase(d, b, h);
      const float* p = probs + (b * d.heads + h) * s * s;
      // dP [s, s] = dO V^T, then dS in place.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int(s), Int(s), Int(hd), 1.0f,
                  dout + base, Int(ld), v + base, Int(ld), 0.0f, ds.data(), Int(s));
      SoftmaxBackwardRows(p, ds.data(), s);
      // dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int(s), Int(hd), Int(s), scale,
                  ds.data(), Int(s), k + base, Int(ld), 0.0f, dq + base, Int(ld));
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Int(s), Int(hd), Int(s), scale,
                  ds.data(), Int(s), q + base, Int(ld), 0.0f, dk + base, Int(ld));
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Int(s), Int(hd), Int(s), 1.0f, p,
                  Int(s), dout + base, Int(ld), 0.0f, dv + base, Int(ld));
    }
  }
}

template <>
void AttentionForward<double>(const double* q, const double* k, const double* v, double* probs,
                              double* o, const AttentionDims& d) {
  AttentionForwardReference(q, k, v, probs, o, d);
}

template <>
void AttentionBackward<double>(const double* dout, const double* q, const double* k,
                               const double* v, const double* probs, double* dq, double* dk,
                               double* dv, const AttentionDims& d) {
  AttentionBackwardReference(dout, q, k, v, probs, dq, dk, dv, d);
}

}  // namespace pipecoord::kernels::cpu
