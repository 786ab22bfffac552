// Deterministic random numbers for weight initialisation and synthetic data.
//
// Everything here is integer arithmetic (plus one float conversion), so a seed gives the same
// numbers on every machine and compiler. SplitMix64 seeds and mixes; Rng is xoshiro256**
// (Blackman & Vigna), seeded from SplitMix64 as its authors recommend.
#ifndef PIPECOORD_KERNELS_CPU_RNG_H_
#define PIPECOORD_KERNELS_CPU_RNG_H_

#include <cstdint>
#include <string_view>

namespace pipecoord::kernels::cpu {

// Advances *state by the golden-ratio increment and returns the mixed value (SplitMix64).
uint64_t SplitMix64(uint64_t* state);

// SplitMix64's finaliser: a bijection on 64-bit words with good avalanche.
uint64_t Mix64(uint64_t x);

// FNV-1a 64-bit hash of a string (used to turn tensor names into seeds).
uint64_t HashString(std::string_view s);

// Combines two words into one seed; order matters: CombineSeeds(a, b) != CombineSeeds(b, a).
uint64_t CombineSeeds(uint64_t a, uint64_t b);

// xoshiro256**: 256 bits of state, period 2^256 - 1. Copyable; a copy continues the stream.
class Rng {
 public:
  explicit Rng(uint64_t seed);

  uint64_t Next();
  // Uniform in [0, 1) with 53 random bits.
  double UniformDouble();
  // Uniform integer in [0, n) for n >= 1 (Lemire's multiply-shift; bias below 2^-32 * n).
  uint32_t Below(uint32_t n);
  // Fills out[0, n) with values uniform in [lo, hi), each rounded to float.
  void FillUniform(float* out, int64_t n, double lo, double hi);
  void FillUniform(double* out, int64_t n, double lo, double hi);

 private:
  uint64_t s_[4];
};

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_RNG_H_
