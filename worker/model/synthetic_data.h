// SyntheticData: a deterministic token stream with learnable structure, so a tiny model's loss
// visibly falls within a few dozen steps.
//
// The language: a fixed random permutation `successor` of the vocabulary (from the seed). The
// first token of a sample is uniform; each next token is successor(previous) with probability
// 1 - noise, else uniform over the vocabulary. A model that learns the rule reaches
// EntropyFloor(); an untrained one sits near log(vocab).
#ifndef PIPECOORD_WORKER_MODEL_SYNTHETIC_DATA_H_
#define PIPECOORD_WORKER_MODEL_SYNTHETIC_DATA_H_

#include <cstdint>
#include <vector>

namespace pipecoord::model {

// b samples of s tokens, sample-major ([b, s] row-major); targets are the inputs shifted by one
// (targets[i][t] = the token after inputs[i][t]).
struct TokenBatch {
  std::vector<int32_t> inputs;
  std::vector<int32_t> targets;
};

class SyntheticData {
 public:
  // vocab, seq_len, micro_batch_size >= 1; noise in [0, 1].
  SyntheticData(uint64_t seed, int vocab, int seq_len, int micro_batch_size, double noise = 0.1);

  // The micro-batch mb of optimizer step `step`: a pure function of (seed, step, mb), so every
  // rank regenerates the same batch. Data-parallel replicas pass disjoint mb ranges
  // (replica * m + local mb).
  TokenBatch Batch(int64_t step, int mb) const;

  int32_t Successor(int32_t token) const { return successor_[token]; }
  // Entropy (nats) of the next-token distribution given the previous token.
  double EntropyFloor() const;

 private:
  uint64_t seed_;
  int vocab_, seq_len_, micro_batch_size_;
  double noise_;
  std::vector<int32_t> successor_;
};

}  // namespace pipecoord::model

#endif  // PIPECOORD_WORKER_MODEL_SYNTHETIC_DATA_H_
