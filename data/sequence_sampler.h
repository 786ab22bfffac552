// Which token sequences each data-parallel replica reads at each step: a pure function of the
// seed and the position, so every run with the same seed reads the same data, replicas never
// read the same sequence in a step, and a run restarted from step k reads exactly what the
// first run read at step k (no sampler state goes into a checkpoint: the step is the state).
//
// The token range [begin, end) is cut into W = (end - begin - 1) / s windows of s + 1 tokens
// that overlap by one (window w starts at begin + w s): a window's first s tokens are the
// inputs, its last s the next-token targets. Documents are not respected: a window may cross
// a boundary, as nanoGPT's and Megatron-LM's GPT samplers do with concatenated documents.
//
// One step reads G = dp x m x b sequences (dp replicas, m micro-batches each, b sequences per
// micro-batch). Sequence number n = step G + (replica m + micro-batch) b + row counts them
// through the run; an epoch is E = floor(W / G) steps, so no step straddles two epochs, and the
// W - E G windows left over rotate with each epoch's order. In epoch e = n / (E G) the sequence
// reads window P_e(n mod E G):
//   shuffled    P_e is IndexPermutation(W, key(seed, e)): a fresh order every epoch
//   sequential  P_e is the identity (validation: every replica walks the held-out range)
// Within an epoch P_e is a bijection, so the G sequences of a step are G distinct windows.
//
// The validation split (SplitTail) is the tail of the stream: the last round(f x tokens)
// tokens. A document that straddles the cut gives its head to training and its tail to
// validation. The tail was chosen over held-out documents because the demo's corpus is one
// long document, and a tail split gives exactly the fraction asked whatever the documents are.
#ifndef PIPECOORD_DATA_SEQUENCE_SAMPLER_H_
#define PIPECOORD_DATA_SEQUENCE_SAMPLER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "data/token_stream.h"

namespace pipecoord::data {

// Tokens [begin, end) of a stream.
struct TokenRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
  bool operator==(const TokenRange&) const = default;
};

struct TrainValSplit {
  TokenRange train;
  TokenRange val;  // empty when the fraction is 0
};

// The training head and validation tail of a stream of `tokens` tokens; val_fraction in [0, 1).
// The tail holds round(val_fraction x tokens) tokens.
Result<TrainValSplit> SplitTail(uint64_t tokens, double val_fraction);

struct SamplingSpec {
  uint64_t seed = 0;
  int seq_len = 0;           // s, tokens per sequence (inputs); >= 1
  int micro_batch_size = 0;  // b, sequences per micro-batch; >= 1
  int microbatches = 0;      // m, micro-batches per replica per step; >= 1
  int dp = 1;                // replicas; >= 1
};

// b sequences of s tokens, sample-major ([b, s] row-major); targets[i][t] is the token after
// inputs[i][t] in the stream.
struct SequenceBatch {
  std::vector<int32_t> inputs;
  std::vector<int32_t> targets;
};

// Where a run stands at the start of a step: the epoch and the sequences of it already read.
struct SamplerPosition {
  uint64_t epoch = 0;
  uint64_t sequence_in_epoch = 0;
};

class SequenceSampler {
 public:
  enum class Order { kShuffled, kSequential };

  // Errors name the rule: "sampling: the range holds 3 windows of 65 tokens, fewer than one
  // step's 4 sequences (dp 1 x 2 micro-batches x 2)".
  static Result<SequenceSampler> Create(TokenRange range, const SamplingSpec& spec, Order order);

  const SamplingSpec& spec() const { return spec_; }
  TokenRange range() const { return range_; }
  uint64_t windows() const { return windows_; }                    // W
  uint64_t sequences_per_step() const { return per_step_; }        // G
  uint64_t steps_per_epoch() const { return steps_per_epoch_; }    // E

  // Stream offset of the first token (input 0) of each of the b sequences that `replica` reads
  // in micro-batch `microbatch` of `step`. Errors: a negative step, replica or micro-batch out
  // of range, a step so large that its sequence number overflows.
  Result<std::vector<uint64_t>> MicroBatchStarts(int64_t step, int replica, int microbatch) const;
  // The window sequence number n reads (its first token's offset in the stream).
  uint64_t SequenceStart(uint64_t n) const;
  SamplerPosition PositionAt(int64_t step) const;

  // The sequences themselves: MicroBatchStarts read from `tokens`, whose ids were checked.
  Result<SequenceBatch> Read(const TokenStream& tokens, int64_t step, int replica, int microbatch) const;

 private:
  SequenceSampler(TokenRange range, const SamplingSpec& spec, Order order, uint64_t windows);

  TokenRange range_;
  SamplingSpec spec_;
  Order order_;
  uint64_t windows_ = 0, per_step_ = 0, steps_per_epoch_ = 0, per_epoch_ = 0;
};

// The b sequences of s tokens starting at `starts` (each with its next-token targets).
// UNAVAILABLE when the tokens' bytes faulted (their file truncated or replaced while mapped).
Result<SequenceBatch> ReadSequences(const TokenStream& tokens, std::span<const uint64_t> starts, int seq_len);

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_SEQUENCE_SAMPLER_H_
