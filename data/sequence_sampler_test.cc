// The sampler's promises: every replica of a step reads different windows, an epoch reads each
// window at most once, the same seed gives the same data, a fresh sampler (a restarted run)
// reads at step k what the first read at step k, and targets are the inputs shifted by one.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "data/index_permutation.h"
#include "data/little_endian.h"
#include "data/sequence_sampler.h"

namespace pipecoord::data {
namespace {

TEST(IndexPermutation, IsABijectionOfZeroToN) {
  for (uint64_t n : {1ull, 2ull, 3ull, 5ull, 16ull, 17ull, 100ull, 1000ull, 4097ull, 65536ull}) {
    for (uint64_t key : {0ull, 1ull, 0xdeadbeefull}) {
      IndexPermutation p(n, key);
      std::vector<bool> hit(n, false);
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t j = p(i);
        ASSERT_LT(j, n) << "n " << n << " key " << key << " i " << i;
        ASSERT_FALSE(hit[j]) << "n " << n << " key " << key << ": " << j << " hit twice";
        hit[j] = true;
      }
    }
  }
}

TEST(IndexPermutation, KeysGiveDifferentOrdersAndTheSameKeyTheSameOne) {
  IndexPermutation a(1000, 7), b(1000, 8), a2(1000, 7);
  int same_as_b = 0, fixed_points = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(a(i), a2(i));
    same_as_b += a(i) == b(i);
    fixed_points += a(i) == i;
  }
  // A random permutation of 1000 agrees with another, or with the identity, in about one place.
  EXPECT_LT(same_as_b, 10);
  EXPECT_LT(fixed_points, 10);
}

TEST(SplitTail, TheTailHoldsTheRoundedFraction) {
  auto s = SplitTail(1000, 0.1);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->train, (TokenRange{0, 900}));
  EXPECT_EQ(s->val, (TokenRange{900, 1000}));
  s = SplitTail(7, 0.15);  // round(1.05) = 1
  EXPECT_EQ(s->train, (TokenRange{0, 6}));
  EXPECT_EQ(s->val, (TokenRange{6, 7}));
  s = SplitTail(7, 0.0);
  EXPECT_EQ(s->train, (TokenRange{0, 7}));
  EXPECT_EQ(s->val.size(), 0u);
  EXPECT_EQ(SplitTail(7, 1.0).status().message(), "validation fraction must be in [0, 1), got 1.000000");
  EXPECT_EQ(SplitTail(7, -0.5).status().message(), "validation fraction must be in [0, 1), got -0.500000");
}

SamplingSpec Spec(uint64_t seed, int s, int b, int m, int dp) {
  SamplingSpec spec;
  spec.seed = seed;
  spec.seq_len = s;
  spec.micro_batch_size = b;
  spec.microbatches = m;
  spec.dp = dp;
  return spec;
}

// Every sequence start of one step, over all replicas and micro-batches.
std::vector<uint64_t> StepStarts(const SequenceSampler& sampler, int64_t step) {
  std::vector<uint64_t> all;
  for (int r = 0; r < sampler.spec().dp; ++r) {
    for (int mb = 0; mb < sampler.spec().microbatches; ++mb) {
      auto starts = sampler.MicroBatchStarts(step, r, mb);
      EXPECT_TRUE(starts.ok()) << starts.status().message();
      all.insert(all.end(), starts->begin(), starts->end());
    }
  }
  return all;
}

TEST(SequenceSampler, CountsWindowsStepsAndEpochs) {
  // 1001 tokens, s = 10: windows start at 0, 10, ..., 990 (the last reads tokens 990..1000).
  auto sampler = SequenceSampler::Create({0, 1001}, Spec(1, 10, 3, 2, 4), SequenceSampler::Order::kShuffled);
  ASSERT_TRUE(sampler.ok()) << sampler.status().message();
  EXPECT_EQ(sampler->windows(), 100u);
  EXPECT_EQ(sampler->sequences_per_step(), 24u);
  EXPECT_EQ(sampler->steps_per_epoch(), 4u);  // 96 of the 100 windows per epoch
  EXPECT_EQ(sampler->PositionAt(0).epoch, 0u);
  EXPECT_EQ(sampler->PositionAt(3).sequence_in_epoch, 72u);
  EXPECT_EQ(sampler->PositionAt(4).epoch, 1u);
  EXPECT_EQ(sampler->PositionAt(4).sequence_in_epoch, 0u);
  EXPECT_EQ(sampler->PositionAt(9).epoch, 2u);
  EXPECT_EQ(sampler->PositionAt(9).sequence_in_epoch, 24u);
}

TEST(SequenceSampler, ReplicasOfAStepNeverShareAWindowAndAnEpochReadsEachWindowOnce) {
  auto sampler = SequenceSampler::Create({0, 1001}, Spec(42, 10, 3, 2, 4), SequenceSampler::Order::kShuffled);
  ASSERT_TRUE(sampler.ok());
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<uint64_t> seen;
    for (uint64_t k = 0; k < sampler->steps_per_epoch(); ++k) {
      const int64_t step = static_cast<int64_t>(epoch * sampler->steps_per_epoch() + k);
      for (uint64_t start : StepStarts(*sampler, step)) {
        EXPECT_EQ(start % 10, 0u);
        EXPECT_LE(start + 11, 1001u);
        EXPECT_TRUE(seen.insert(start).second) << "epoch " << epoch << " step " << step << " reads " << start << " again";
      }
    }
    EXPECT_EQ(seen.size(), 96u);
  }
}

TEST(SequenceSampler, TheSeedDecidesTheOrderAndEachEpochHasItsOwn) {
  auto a = SequenceSampler::Create({0, 1001}, Spec(42, 10, 3, 2, 4), SequenceSampler::Order::kShuffled);
  auto same = SequenceSampler::Create({0, 1001}, Spec(42, 10, 3, 2, 4), SequenceSampler::Order::kShuffled);
  auto other = SequenceSampler::Create({0, 1001}, Spec(43, 10, 3, 2, 4), SequenceSampler::Order::kShuffled);
  EXPECT_EQ(StepStarts(*a, 0), StepStarts(*same, 0));
  EXPECT_NE(StepStarts(*a, 0), StepStarts(*other, 0));
  EXPECT_NE(StepStarts(*a, 0), StepStarts(*a, 4));  // the first step of epochs 0 and 1
}

TEST(SequenceSampler, ARestartedRunReadsAtStepKWhatTheFirstRunReadAtStepK) {
  const SamplingSpec spec = Spec(7, 16, 2, 3, 2);
  auto first = SequenceSampler::Create({0, 5000}, spec, SequenceSampler::Order::kShuffled);
  ASSERT_TRUE(first.ok());
  std::vector<std::vector<uint64_t>> read;
  for (int64_t step = 0; step < 40; ++step) read.push_back(StepStarts(*first, step));  // spans epochs
  // The restart: a new sampler from the same spec, asked from step 25 on.
  auto restarted = SequenceSampler::Create({0, 5000}, spec, SequenceSampler::Order::kShuffled);
  for (int64_t step = 25; step < 40; ++step) EXPECT_EQ(StepStarts(*restarted, step), read[step]) << step;
}

TEST(SequenceSampler, SequentialOrderWalksTheRangeFromItsStart) {
  auto val = SequenceSampler::Create({900, 1000}, Spec(1, 8, 2, 1, 3), SequenceSampler::Order::kSequential);
  ASSERT_TRUE(val.ok());
  EXPECT_EQ(val->windows(), 12u);  // (100 - 1) / 8
  EXPECT_EQ(val->steps_per_epoch(), 2u);
  EXPECT_EQ(*val->MicroBatchStarts(0, 0, 0), (std::vector<uint64_t>{900, 908}));
  EXPECT_EQ(*val->MicroBatchStarts(0, 2, 0), (std::vector<uint64_t>{932, 940}));
  EXPECT_EQ(*val->MicroBatchStarts(1, 2, 0), (std::vector<uint64_t>{980, 988}));
  EXPECT_EQ(*val->MicroBatchStarts(2, 0, 0), (std::vector<uint64_t>{900, 908}));  // the next pass
}

TEST(SequenceSampler, ReadsInputsAndTheirNextTokens) {
  std::string bytes;
  for (uint64_t i = 0; i < 300; ++i) AppendLittleEndian(&bytes, (i * 7 + 3) % 251, 2);
  const TokenStream tokens(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
                           TokenDtype::kUint16);
  auto sampler = SequenceSampler::Create({20, 280}, Spec(5, 12, 4, 2, 2), SequenceSampler::Order::kShuffled);
  ASSERT_TRUE(sampler.ok());
  for (int64_t step = 0; step < 6; ++step) {
    for (int r = 0; r < 2; ++r) {
      for (int mb = 0; mb < 2; ++mb) {
        auto starts = sampler->MicroBatchStarts(step, r, mb);
        auto batch = sampler->Read(tokens, step, r, mb);
        ASSERT_TRUE(batch.ok()) << batch.status().message();
        ASSERT_EQ(batch->inputs.size(), 48u);
        ASSERT_EQ(batch->targets.size(), 48u);
        for (int row = 0; row < 4; ++row) {
          const uint64_t start = (*starts)[row];
          EXPECT_GE(start, 20u);
          EXPECT_LE(start + 13, 280u);
          for (int t = 0; t < 12; ++t) {
            EXPECT_EQ(batch->inputs[row * 12 + t], static_cast<int32_t>(((start + t) * 7 + 3) % 251));
            EXPECT_EQ(batch->targets[row * 12 + t], static_cast<int32_t>(((start + t + 1) * 7 + 3) % 251));
          }
        }
      }
    }
  }
  auto past = SequenceSampler::Create({0, 400}, Spec(5, 12, 1, 1, 1), SequenceSampler::Order::kShuffled);
  EXPECT_EQ(past->Read(tokens, 0, 0, 0).status().message(),
            "sampling: the range ends at token 400, past the stream's 300 tokens");
}

TEST(SequenceSampler, RefusesWhatItCannotServe) {
  EXPECT_EQ(SequenceSampler::Create({0, 100}, Spec(1, 10, 2, 2, 3), SequenceSampler::Order::kShuffled).status().message(),
            "sampling: the range of 100 tokens holds 9 windows of 11 tokens, fewer than one step's 12 sequences (dp 3 "
            "x 2 micro-batches x 2)");
  EXPECT_EQ(SequenceSampler::Create({0, 100}, Spec(1, 0, 2, 2, 3), SequenceSampler::Order::kShuffled).status().message(),
            "sampling: seq_len must be >= 1, got 0");
  EXPECT_EQ(SequenceSampler::Create({0, 100}, Spec(1, 4, 1, 1, 0), SequenceSampler::Order::kShuffled).status().message(),
            "sampling: dp must be >= 1, got 0");
  EXPECT_EQ(SequenceSampler::Create({5, 1}, Spec(1, 4, 1, 1, 1), SequenceSampler::Order::kShuffled).status().message(),
            "sampling: the range [5, 1) ends before it begins");
  auto sampler = SequenceSampler::Create({0, 100}, Spec(1, 4, 1, 2, 2), SequenceSampler::Order::kShuffled);
  ASSERT_TRUE(sampler.ok());
  EXPECT_EQ(sampler->MicroBatchStarts(-1, 0, 0).status().message(), "sampling: step must be >= 0, got -1");
  EXPECT_EQ(sampler->MicroBatchStarts(0, 2, 0).status().message(), "sampling: replica 2 is outside [0, 2)");
  EXPECT_EQ(sampler->MicroBatchStarts(0, 0, 2).status().message(), "sampling: micro-batch 2 is outside [0, 2)");
  EXPECT_EQ(sampler->MicroBatchStarts(int64_t{1} << 62, 0, 0).status().message(),
            "sampling: step 4611686018427387904 is too large to number its sequences");
}

}  // namespace
}  // namespace pipecoord::data
