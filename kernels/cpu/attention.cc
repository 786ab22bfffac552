#include "kernels/cpu/attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/cpu/attention_reference.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/lane_sum.h"
#include "kernels/cpu/linear_reference.h"
#include "kernels/cpu/vector_exp.h"

namespace pipecoord::kernels::cpu {
namespace {

int Int(int64_t v) { return static_cast<int>(v); }

// Causal attention in blocks of this many query rows (and key columns in the backward): each
// product covers only the keys its rows may see (the square's lower block triangle), so the
// score and gradient products do (s / B + 1) / (2 s / B) of the whole square's work: 62.5 % at
// s 128, 53 % at s 512, all of it at s <= 32. Smaller blocks skip more but run sgemm on thinner
// shapes.
constexpr int64_t kCausalBlock = 32;

// One (sample, head)'s rows of q, o and their gradients start at `base` and lie `hidden` floats
// apart: sgemm reads and writes them in place through its leading dimension.
int64_t HeadBase(const AttentionDims& d, int64_t b, int64_t h) {
  return b * d.seq * d.hidden() + h * d.head_dim;
}

// The rows of k, v and their gradients that query head h reads: its key/value head's, kv_hidden
// floats apart.
int64_t KvHeadBase(const AttentionDims& d, int64_t b, int64_t h) {
  return b * d.seq * d.kv_hidden() + (h / d.group()) * d.head_dim;
}

inline float RowMax(const float* x, int64_t n) {
  float m[8];
  for (int l = 0; l < 8; ++l) m[l] = x[0];
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) m[l] = std::max(m[l], x[j + l]);
  }
  for (int l = 0; j < n; ++j, ++l) m[l] = std::max(m[l], x[j]);
  return std::max(std::max(std::max(m[0], m[1]), std::max(m[2], m[3])),
                  std::max(std::max(m[4], m[5]), std::max(m[6], m[7])));
}

// Rows i0 .. i0 + rows - 1 of an s x s matrix, p pointing at row i0: row i holds the scaled
// scores s_i0 .. s_ii (later entries unset); leaves softmax over d.first_key(i) <= j <= i (the
// maximum subtracted before exp), zeros elsewhere. The exp (vector_exp.h's double one), the sum
// and the division run in double (deterministic: lane_sum.h): O(s^2) work beside the sgemms'
// O(s^2 d), and the probabilities then carry the scores' fp32 error and one rounding only
// (attention_test's bound). e: s scratch values. Clones: vector code for the CPU it runs on, picked once.
__attribute__((target_clones("avx512f", "avx2", "default"))) void CausalSoftmaxRows(
    float* p, int64_t i0, int64_t rows, const AttentionDims& d, double* e) {
  const int64_t s = d.seq;
  for (int64_t i = i0; i < i0 + rows; ++i) {
    float* row = p + (i - i0) * s;
    const int64_t lo = d.first_key(i), m = i + 1 - lo;
    float* seen = row + lo;
    const double mx = RowMax(seen, m);
    for (int64_t j = 0; j < m; ++j) e[j] = VectorExp(static_cast<double>(seen[j]) - mx);
    const double sum = LaneSum(m, [&](int64_t j) { return e[j]; });
    for (int64_t j = 0; j < m; ++j) seen[j] = static_cast<float>(e[j] / sum);
    std::fill(row, seen, 0.0f);
    std::fill(row + i + 1, row + s, 0.0f);
  }
}

// Rows i0 .. i0 + rows - 1, p and ds pointing at row i0: row i of ds holds dP_i0 .. dP_ii (later
// entries unset); leaves dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij'), the row sum and the product in
// double, rounded once. P is zero above the diagonal and outside a sliding window, so is dS.
__attribute__((target_clones("avx512f", "avx2", "default"))) void SoftmaxBackwardRows(
    const float* p, float* ds, int64_t i0, int64_t rows, int64_t s) {
  for (int64_t i = i0; i < i0 + rows; ++i) {
    const float* pi = p + (i - i0) * s;
    float* dsi = ds + (i - i0) * s;
    const int64_t m = i + 1;
    const double row = LaneSum(m, [&](int64_t j) { return static_cast<double>(pi[j]) * dsi[j]; });
    for (int64_t j = 0; j < m; ++j) {
      dsi[j] = static_cast<float>(pi[j] * (static_cast<double>(dsi[j]) - row));
    }
    std::fill(dsi + m, dsi + s, 0.0f);
  }
}

}  // namespace

template <>
void AttentionForward<float>(const float* q, const float* k, const float* v, float* probs,
                             float* o, const AttentionDims& d) {
  if (ReferenceKernelsRequested()) return AttentionForwardReference(q, k, v, probs, o, d);
  const int64_t s = d.seq, hd = d.head_dim, ld = d.hidden(), lkv = d.kv_hidden();
  if (s == 0 || hd == 0) return;
  GemmThreads();  // sets OpenBLAS's thread count before the first sgemm
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<double> e(static_cast<size_t>(s));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t base = HeadBase(d, b, h), kv = KvHeadBase(d, b, h);
      float* p = probs + (b * d.heads + h) * s * s;
      for (int64_t i0 = 0; i0 < s; i0 += kCausalBlock) {
        const int64_t rows = std::min(kCausalBlock, s - i0), keys = i0 + rows;
        float* pi = p + i0 * s;
        // P [i0, i0 + rows) x [0, keys) = scale Q K^T: the keys these rows may see.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int(rows), Int(keys), Int(hd), scale,
                    q + base + i0 * ld, Int(ld), k + kv, Int(lkv), 0.0f, pi, Int(s));
        CausalSoftmaxRows(pi, i0, rows, d, e.data());
        // O rows = P V over those keys.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int(rows), Int(hd), Int(keys), 1.0f,
                    pi, Int(s), v + kv, Int(lkv), 0.0f, o + base + i0 * ld, Int(ld));
      }
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
  const int64_t s = d.seq, hd = d.head_dim, ld = d.hidden(), lkv = d.kv_hidden();
  if (s == 0 || hd == 0) return;
  GemmThreads();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<float> ds(static_cast<size_t>(s * s));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t base = HeadBase(d, b, h), kv = KvHeadBase(d, b, h);
      // The group's first query head writes dk and dv, the others add to them (in head order).
      const float beta = h % d.group() == 0 ? 0.0f : 1.0f;
      const float* p = probs + (b * d.heads + h) * s * s;
      // Row blocks: dP = dO V^T over the keys each row sees, dS in place, dQ = scale dS K.
      for (int64_t i0 = 0; i0 < s; i0 += kCausalBlock) {
        const int64_t rows = std::min(kCausalBlock, s - i0), keys = i0 + rows;
        float* dsi = ds.data() + i0 * s;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int(rows), Int(keys), Int(hd), 1.0f,
                    dout + base + i0 * ld, Int(ld), v + kv, Int(lkv), 0.0f, dsi, Int(s));
        SoftmaxBackwardRows(p + i0 * s, dsi, i0, rows, s);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int(rows), Int(hd), Int(keys), scale,
                    dsi, Int(s), k + kv, Int(lkv), 0.0f, dq + base + i0 * ld, Int(ld));
      }
      // Key blocks: dK = scale dS^T Q and dV = P^T dO over the rows that see each key.
      for (int64_t j0 = 0; j0 < s; j0 += kCausalBlock) {
        const int64_t cols = std::min(kCausalBlock, s - j0), rows = s - j0;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Int(cols), Int(hd), Int(rows), scale,
                    ds.data() + j0 * s + j0, Int(s), q + base + j0 * ld, Int(ld), beta,
                    dk + kv + j0 * lkv, Int(lkv));
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Int(cols), Int(hd), Int(rows), 1.0f,
                    p + j0 * s + j0, Int(s), dout + base + j0 * ld, Int(ld), beta,
                    dv + kv + j0 * lkv, Int(lkv));
      }
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
