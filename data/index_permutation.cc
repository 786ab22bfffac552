#include "data/index_permutation.h"

namespace pipecoord::data {

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

IndexPermutation::IndexPermutation(uint64_t n, uint64_t key) : n_(n), key_(Mix64(key)) {
  int bits = 2;
  while (bits < 64 && (uint64_t{1} << bits) < n) bits += 2;
  half_bits_ = bits / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
}

uint64_t IndexPermutation::Feistel(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (uint64_t round = 0; round < 6; ++round) {
    const uint64_t f = Mix64(key_ ^ Mix64((round << 56) ^ right)) & half_mask_;
    const uint64_t next = left ^ f;
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t IndexPermutation::operator()(uint64_t i) const {
  uint64_t x = Feistel(i);
  while (x >= n_) x = Feistel(x);
  return x;
}

}  // namespace pipecoord::data
