#include "worker/model/synthetic_data.h"

#include <cmath>
#include <numeric>
#include <utility>

#include "kernels/cpu/rng.h"

namespace pipecoord::model {

using kernels::cpu::CombineSeeds;
using kernels::cpu::HashString;
using kernels::cpu::Rng;

SyntheticData::SyntheticData(uint64_t seed, int vocab, int seq_len, int micro_batch_size,
                             double noise)
    : seed_(CombineSeeds(seed, HashString("synthetic-data"))),
      vocab_(vocab),
      seq_len_(seq_len),
      micro_batch_size_(micro_batch_size),
      noise_(noise),
      successor_(static_cast<size_t>(vocab)) {
  std::iota(successor_.begin(), successor_.end(), 0);
  Rng rng(CombineSeeds(seed_, HashString("successor")));
  for (int i = vocab - 1; i > 0; --i) {  // Fisher-Yates
    std::swap(successor_[i], successor_[rng.Below(static_cast<uint32_t>(i + 1))]);
  }
}

TokenBatch SyntheticData::Batch(int64_t step, int mb) const {
  TokenBatch batch;
  const size_t n = static_cast<size_t>(micro_batch_size_) * seq_len_;
  batch.inputs.reserve(n);
  batch.targets.reserve(n);
  const uint64_t mb_seed =
      CombineSeeds(CombineSeeds(seed_, static_cast<uint64_t>(step)), static_cast<uint64_t>(mb));
  for (int r = 0; r < micro_batch_size_; ++r) {
    Rng rng(CombineSeeds(mb_seed, static_cast<uint64_t>(r)));
    int32_t tok = static_cast<int32_t>(rng.Below(static_cast<uint32_t>(vocab_)));
    for (int t = 0; t < seq_len_; ++t) {
      const bool random = rng.UniformDouble() < noise_;
      const int32_t next = random ? static_cast<int32_t>(rng.Below(static_cast<uint32_t>(vocab_)))
                                  : successor_[tok];
      batch.inputs.push_back(tok);
      batch.targets.push_back(next);
      tok = next;
    }
  }
  return batch;
}

double SyntheticData::EntropyFloor() const {
  const double q = noise_ / vocab_;       // any particular token, drawn at random
  const double p = 1.0 - noise_ + q;      // the successor
  double h = p > 0 ? -p * std::log(p) : 0.0;
  if (q > 0) h -= (vocab_ - 1) * q * std::log(q);
  return h;
}

}  // namespace pipecoord::model
