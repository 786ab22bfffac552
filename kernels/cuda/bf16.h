// The bf16 storage type of the launchers' signatures, usable from host code built by g++.
//
// Launchers take CUDA's __nv_bfloat16 pointers. The type is declared here as cuda_bf16.h itself
// declares it ahead of its definition, because host code built by g++ cannot include
// cuda_bf16.h through @cuda//:cuda_headers (it needs cccl's <nv/target>, which that target does
// not carry). .cu files include cuda_bf16.h after this and get the full type.
//
// For host code that fills or reads bf16 buffers: conversions on the raw bits (the layout of
// __nv_bfloat16 and of kernels::Tensor's DType::kBF16: the high 16 bits of a float).
#ifndef PIPECOORD_KERNELS_CUDA_BF16_H_
#define PIPECOORD_KERNELS_CUDA_BF16_H_

#include <cstdint>
#include <cstring>

struct __nv_bfloat16;

namespace pipecoord::kernels::cuda {

// Rounds to nearest even, as __float2bfloat16_rn: overflow gives infinity; a NaN stays a NaN
// (quiet, sign kept).
inline uint16_t FloatToBf16Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// Exact: every bf16 value is a float.
inline float Bf16BitsToFloat(uint16_t bf16) {
  const uint32_t bits = static_cast<uint32_t>(bf16) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// p + n for code that sees __nv_bfloat16 incomplete (host code built by g++): an element is 2
// bytes, as the type's layout above says.
inline __nv_bfloat16* Bf16Offset(__nv_bfloat16* p, int64_t n) {
  return reinterpret_cast<__nv_bfloat16*>(reinterpret_cast<char*>(p) + 2 * n);
}

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_BF16_H_
