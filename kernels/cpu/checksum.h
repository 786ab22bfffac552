// Checksums of float buffers for numerical probes: two reductions with a fixed definition, so a
// CPU and a GPU implementation (or two runs) can be compared exactly.
//
// HashFloats is exact and order-free: it sums, modulo 2^64, one mixed word per element made
// from the element's index and its bit pattern. Integer addition is associative, so a parallel
// reduction in any order gives the same hash; and since the per-element mix is a bijection,
// changing any single element (even by one ulp, or +0 to -0) always changes the hash.
//
// OrderedSum is a value-level summary (it tells how large a drift is, where the hash only
// tells that there is one): fixed-size blocks summed left to right in double, then the block
// sums combined by a fixed pairwise tree. The order is part of the definition.
#ifndef PIPECOORD_KERNELS_CPU_CHECKSUM_H_
#define PIPECOORD_KERNELS_CPU_CHECKSUM_H_

#include <cstdint>

namespace pipecoord::kernels::cpu {

// Elements per block of OrderedSum.
inline constexpr int64_t kChecksumBlock = 256;

// sum over i of Mix64(bits(x[i]) + (i + 1) * 0x9E3779B97F4A7C15), modulo 2^64. Empty: 0.
uint64_t HashFloats(const float* x, int64_t n);

// Block b = x[256 b, 256 b + 256) summed left to right in double; the block sums are then
// combined pairwise: level by level, neighbours (2j, 2j+1) are added, an odd last one carried.
double OrderedSum(const float* x, int64_t n);

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_CHECKSUM_H_
