// exp(x) as straight-line arithmetic (no call, no branch), so that loops over arrays vectorise:
// Cody-Waite reduction x = k ln2 + r, |r| <= ln2 / 2, a polynomial for exp(r), scaled by 2^k
// through the exponent bits. The result depends only on x and the instructions the compiler
// picked (FMA or not), never on the data around it.
#ifndef PIPECOORD_KERNELS_CPU_VECTOR_EXP_H_
#define PIPECOORD_KERNELS_CPU_VECTOR_EXP_H_

#include <algorithm>
#include <bit>
#include <cstdint>

namespace pipecoord::kernels::cpu {

// float: Cephes' degree-6 minimax polynomial (S. L. Moshier, Cephes Math Library, expf.c). Within
// 2 ulp of exp on [-87, 88]; x is clamped to that range (exp(-87) is 1.6e-38, still a normal
// float; exp(88) is 1.65e38), which callers that divide by 1 + exp rely on.
inline float VectorExp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // k = round(x / ln2): adding 1.5 * 2^23 rounds to an integer in the default rounding mode.
  const float kf = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (x - kf * 0.693359375f) - kf * -2.12194440e-4f;  // ln2 = hi + lo, hi exact
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const int32_t k = static_cast<int32_t>(kf);  // in [-126, 127]
  return p * std::bit_cast<float>((k + 127) << 23);
}

// double: fdlibm's ln2 split and the Taylor polynomial to r^13 / 13! (truncation below 4e-18
// relative for |r| <= ln2 / 2); within a few ulp of exp (vector_exp_test). x is clamped to
// [-708, 709] (exp(-708) is 3.3e-308, still normal): callers use it where smaller values round
// to 0 in float anyway. k comes from the rounding constant's low bits, not a conversion, so the
// loop vectorises without AVX-512DQ.
inline double VectorExp(double x) {
  x = std::min(std::max(x, -708.0), 709.0);
  const double magic = 6755399441055744.0;  // 1.5 * 2^52
  const double t = x * 1.4426950408889634 + magic;
  const double kd = t - magic;
  const double r = (x - kd * 6.93147180369123816490e-01) - kd * 1.90821492927058770002e-10;
  double p = 1.0 / 6227020800.0;  // 1 / 13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * (r * r) + r + 1.0;
  const int64_t k = std::bit_cast<int64_t>(t) - std::bit_cast<int64_t>(magic);  // in [-1021, 1023]
  return p * std::bit_cast<double>((k + 1023) << 52);
}

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_VECTOR_EXP_H_
