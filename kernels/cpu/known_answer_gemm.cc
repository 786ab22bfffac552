#include "kernels/cpu/known_answer_gemm.h"

#include <cmath>

#include "kernels/cpu/linear_reference.h"
#include "kernels/cpu/rng.h"

namespace pipecoord::kernels::cpu {
namespace {

// The sketch weights r [m] then c [n], integers in [1, 16], from their own stream of the seed.
void SketchWeights(uint64_t seed, const ProbeShape& s, std::vector<int64_t>* r, std::vector<int64_t>* c) {
  Rng rng(CombineSeeds(seed, 0x736b65746368ULL));  // "sketch"
  r->resize(s.m);
  c->resize(s.n);
  for (int64_t& v : *r) v = static_cast<int64_t>(rng.Below(16)) + 1;
  for (int64_t& v : *c) v = static_cast<int64_t>(rng.Below(16)) + 1;
}

// The words hashed: m, k, n, the count of non-integral elements, the row sketch, the column sketch;
// each mixed with its position and summed modulo 2^64 (as checksum.h's HashFloats).
uint64_t HashSketch(const ProbeShape& s, int64_t non_integral, const std::vector<int64_t>& row,
                    const std::vector<int64_t>& col) {
  uint64_t h = 0, i = 0;
  auto add = [&](int64_t word) { h += Mix64(static_cast<uint64_t>(word) + (++i) * 0x9E3779B97F4A7C15ULL); };
  add(s.m);
  add(s.k);
  add(s.n);
  add(non_integral);
  for (int64_t v : row) add(v);
  for (int64_t v : col) add(v);
  return h;
}

}  // namespace

std::string ProbeShape::ToString() const {
  return std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) + " GEMM";
}

bool ValidProbeShape(const ProbeShape& s) {
  if (s.m < 1 || s.k < 1 || s.n < 1 || s.k > kMaxProbeInner) return false;
  if (s.m > kMaxProbeElements || s.n > kMaxProbeElements) return false;
  return s.m * s.k <= kMaxProbeElements && s.n * s.k <= kMaxProbeElements && s.m * s.n <= kMaxProbeElements;
}

uint64_t ProbeSeed(uint64_t job_seed, int step) {
  return CombineSeeds(CombineSeeds(job_seed, 0x70726f6265ULL), static_cast<uint64_t>(step));
}

ProbeInputs MakeProbeInputs(uint64_t seed, const ProbeShape& s) {
  ProbeInputs in{std::vector<float>(s.m * s.k), std::vector<float>(s.n * s.k)};
  Rng rng(seed);
  for (float& v : in.x) v = static_cast<float>(static_cast<int>(rng.Below(17)) - 8);
  for (float& v : in.w) v = static_cast<float>(static_cast<int>(rng.Below(17)) - 8);
  return in;
}

uint64_t ProbeChecksum(const float* y, const ProbeShape& s, uint64_t seed) {
  std::vector<int64_t> r, c;
  SketchWeights(seed, s, &r, &c);
  std::vector<int64_t> row(s.n, 0), col(s.m, 0);
  int64_t non_integral = 0;
  for (int64_t i = 0; i < s.m; ++i) {
    const float* yi = y + i * s.n;
    int64_t sum = 0;
    for (int64_t j = 0; j < s.n; ++j) {
      const float v = yi[j];
      // Exact answers are integers of magnitude <= 64 k <= 2^24; anything else is wrong.
      if (!(std::fabs(v) <= 16777216.0f) || v != std::trunc(v)) {
        ++non_integral;
        continue;
      }
      const int64_t iv = static_cast<int64_t>(v);
      row[j] += r[i] * iv;
      sum += c[j] * iv;
    }
    col[i] = sum;
  }
  return HashSketch(s, non_integral, row, col);
}

uint64_t KnownAnswerChecksum(uint64_t seed, const ProbeShape& s) {
  const ProbeInputs in = MakeProbeInputs(seed, s);
  std::vector<int64_t> r, c;
  SketchWeights(seed, s, &r, &c);
  // u = X^T r [k], v = W^T c [k]; row = W u, col = X v.
  std::vector<int64_t> u(s.k, 0), v(s.k, 0);
  for (int64_t i = 0; i < s.m; ++i) {
    const float* xi = in.x.data() + i * s.k;
    for (int64_t t = 0; t < s.k; ++t) u[t] += r[i] * static_cast<int64_t>(xi[t]);
  }
  for (int64_t j = 0; j < s.n; ++j) {
    const float* wj = in.w.data() + j * s.k;
    for (int64_t t = 0; t < s.k; ++t) v[t] += c[j] * static_cast<int64_t>(wj[t]);
  }
  std::vector<int64_t> row(s.n, 0), col(s.m, 0);
  for (int64_t j = 0; j < s.n; ++j) {
    const float* wj = in.w.data() + j * s.k;
    int64_t sum = 0;
    for (int64_t t = 0; t < s.k; ++t) sum += static_cast<int64_t>(wj[t]) * u[t];
    row[j] = sum;
  }
  for (int64_t i = 0; i < s.m; ++i) {
    const float* xi = in.x.data() + i * s.k;
    int64_t sum = 0;
    for (int64_t t = 0; t < s.k; ++t) sum += static_cast<int64_t>(xi[t]) * v[t];
    col[i] = sum;
  }
  return HashSketch(s, 0, row, col);
}

std::vector<float> KnownAnswerGemm(uint64_t seed, const ProbeShape& s) {
  const ProbeInputs in = MakeProbeInputs(seed, s);
  std::vector<float> y(s.m * s.n);
  LinearForwardReference(in.x.data(), in.w.data(), y.data(), LinearDims{s.m, s.k, s.n});
  return y;
}

}  // namespace pipecoord::kernels::cpu
