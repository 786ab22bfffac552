// exp(x) in float as straight-line arithmetic (no call, no branch), so that loops over arrays
// vectorise: Cody-Waite reduction x = k ln2 + r, |r| <= ln2 / 2, and Cephes' degree-6 minimax
// polynomial for exp(r) (S. L. Moshier, Cephes Math Library, expf.c), scaled by 2^k through the
// exponent bits. Within 2 ulp of exp on [-87, 88]; x is clamped to that range (exp(-87) is
// 1.6e-38, still a normal float; exp(88) is 1.65e38), which callers that divide by 1 + exp
// rely on. The result depends only on x and the instructions the compiler picked (FMA or not),
// never on the data around it.
#ifndef PIPECOORD_KERNELS_CPU_VECTOR_EXP_H_
#define PIPECOORD_KERNELS_CPU_VECTOR_EXP_H_

#include <algorithm>
#include <bit>
#include <cstdint>

namespace pipecoord::kernels::cpu {

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

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_VECTOR_EXP_H_
