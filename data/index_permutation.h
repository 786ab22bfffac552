// IndexPermutation: a pseudo-random bijection of [0, n) computed index by index, with no table,
// so shuffling a corpus of billions of sequences costs no memory and any position of any epoch
// is found directly (what makes the sampler resumable at an exact step).
//
// Construction: a balanced Feistel network (six rounds, a SplitMix64-style round function keyed
// by `key` and the round) permutes the b-bit integers, 2^b the smallest even power of two >= n;
// indices it sends to n or beyond are sent through it again ("cycle walking") until they land
// below n, which keeps it a bijection of [0, n) and takes under four rounds on average
// (2^b < 4n).
#ifndef PIPECOORD_DATA_INDEX_PERMUTATION_H_
#define PIPECOORD_DATA_INDEX_PERMUTATION_H_

#include <cstdint>

namespace pipecoord::data {

// SplitMix64's finaliser: a fixed bijective mix of 64 bits (Steele, Lea, Flood 2014), used to
// derive keys and round values from seeds.
uint64_t Mix64(uint64_t x);

class IndexPermutation {
 public:
  // n >= 1.
  IndexPermutation(uint64_t n, uint64_t key);

  // The image of i, for i < n.
  uint64_t operator()(uint64_t i) const;
  uint64_t size() const { return n_; }

 private:
  uint64_t Feistel(uint64_t x) const;

  uint64_t n_;
  uint64_t key_;
  int half_bits_;
  uint64_t half_mask_;
};

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_INDEX_PERMUTATION_H_
