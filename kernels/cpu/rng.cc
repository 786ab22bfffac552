#include "kernels/cpu/rng.h"

namespace pipecoord::kernels::cpu {
namespace {

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t SplitMix64(uint64_t* state) {
  *state += 0x9E3779B97F4A7C15ULL;
  return Mix64(*state);
}

uint64_t HashString(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ULL;
  }
  return h;
}

uint64_t CombineSeeds(uint64_t a, uint64_t b) {
  return Mix64(Mix64(a) + 0x9E3779B97F4A7C15ULL * (b + 1));
}

Rng::Rng(uint64_t seed) {
  uint64_t st = seed;
  for (uint64_t& w : s_) w = SplitMix64(&st);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::UniformDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

uint32_t Rng::Below(uint32_t n) {
  return static_cast<uint32_t>(((Next() >> 32) * static_cast<uint64_t>(n)) >> 32);
}

void Rng::FillUniform(float* out, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(lo + (hi - lo) * UniformDouble());
}

void Rng::FillUniform(double* out, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; ++i) out[i] = lo + (hi - lo) * UniformDouble();
}

}  // namespace pipecoord::kernels::cpu
