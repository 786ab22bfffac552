#include "data/sequence_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "data/index_permutation.h"

namespace pipecoord::data {

Result<TrainValSplit> SplitTail(uint64_t tokens, double val_fraction) {
  if (!(val_fraction >= 0 && val_fraction < 1)) {
    return InvalidArgument("validation fraction must be in [0, 1), got " + std::to_string(val_fraction));
  }
  const uint64_t val = static_cast<uint64_t>(std::llround(val_fraction * static_cast<double>(tokens)));
  const uint64_t cut = tokens - std::min(val, tokens);
  return TrainValSplit{TokenRange{0, cut}, TokenRange{cut, tokens}};
}

SequenceSampler::SequenceSampler(TokenRange range, const SamplingSpec& spec, Order order, uint64_t windows)
    : range_(range), spec_(spec), order_(order), windows_(windows) {
  per_step_ = static_cast<uint64_t>(spec.dp) * static_cast<uint64_t>(spec.microbatches) *
              static_cast<uint64_t>(spec.micro_batch_size);
  steps_per_epoch_ = windows_ / per_step_;
  per_epoch_ = steps_per_epoch_ * per_step_;
}

Result<SequenceSampler> SequenceSampler::Create(TokenRange range, const SamplingSpec& spec, Order order) {
  auto positive = [](const char* name, int v) -> Status {
    if (v >= 1) return Status::Ok();
    return InvalidArgument(std::string("sampling: ") + name + " must be >= 1, got " + std::to_string(v));
  };
  PIPECOORD_RETURN_IF_ERROR(positive("seq_len", spec.seq_len));
  PIPECOORD_RETURN_IF_ERROR(positive("micro_batch_size", spec.micro_batch_size));
  PIPECOORD_RETURN_IF_ERROR(positive("microbatches", spec.microbatches));
  PIPECOORD_RETURN_IF_ERROR(positive("dp", spec.dp));
  if (range.end < range.begin) {
    return InvalidArgument("sampling: the range [" + std::to_string(range.begin) + ", " + std::to_string(range.end) +
                           ") ends before it begins");
  }
  const uint64_t s = static_cast<uint64_t>(spec.seq_len);
  const uint64_t windows = range.size() < 2 ? 0 : (range.size() - 1) / s;
  SequenceSampler sampler(range, spec, order, windows);
  if (windows < sampler.per_step_) {
    return InvalidArgument("sampling: the range of " + std::to_string(range.size()) + " tokens holds " +
                           std::to_string(windows) + " windows of " + std::to_string(s + 1) +
                           " tokens, fewer than one step's " + std::to_string(sampler.per_step_) + " sequences (dp " +
                           std::to_string(spec.dp) + " x " + std::to_string(spec.microbatches) + " micro-batches x " +
                           std::to_string(spec.micro_batch_size) + ")");
  }
  return sampler;
}

uint64_t SequenceSampler::SequenceStart(uint64_t n) const {
  const uint64_t epoch = n / per_epoch_, position = n % per_epoch_;
  uint64_t window = position;
  if (order_ == Order::kShuffled) {
    const IndexPermutation order(windows_, Mix64(spec_.seed) ^ Mix64(epoch ^ 0x5eed5a3b1e000000ull));
    window = order(position);
  }
  return range_.begin + window * static_cast<uint64_t>(spec_.seq_len);
}

SamplerPosition SequenceSampler::PositionAt(int64_t step) const {
  const uint64_t n = static_cast<uint64_t>(step < 0 ? 0 : step) * per_step_;
  return {n / per_epoch_, n % per_epoch_};
}

Result<std::vector<uint64_t>> SequenceSampler::MicroBatchStarts(int64_t step, int replica, int microbatch) const {
  if (step < 0) return InvalidArgument("sampling: step must be >= 0, got " + std::to_string(step));
  if (replica < 0 || replica >= spec_.dp) {
    return InvalidArgument("sampling: replica " + std::to_string(replica) + " is outside [0, " + std::to_string(spec_.dp) + ")");
  }
  if (microbatch < 0 || microbatch >= spec_.microbatches) {
    return InvalidArgument("sampling: micro-batch " + std::to_string(microbatch) + " is outside [0, " +
                           std::to_string(spec_.microbatches) + ")");
  }
  if (static_cast<uint64_t>(step) > (std::numeric_limits<uint64_t>::max() - per_step_) / per_step_) {
    return InvalidArgument("sampling: step " + std::to_string(step) + " is too large to number its sequences");
  }
  const uint64_t b = static_cast<uint64_t>(spec_.micro_batch_size);
  const uint64_t first = static_cast<uint64_t>(step) * per_step_ +
                         (static_cast<uint64_t>(replica) * static_cast<uint64_t>(spec_.microbatches) +
                          static_cast<uint64_t>(microbatch)) * b;
  std::vector<uint64_t> starts(b);
  for (uint64_t row = 0; row < b; ++row) starts[row] = SequenceStart(first + row);
  return starts;
}

Result<SequenceBatch> SequenceSampler::Read(const TokenStream& tokens, int64_t step, int replica, int microbatch) const {
  if (tokens.size() < range_.end) {
    return InvalidArgument("sampling: the range ends at token " + std::to_string(range_.end) + ", past the stream's " +
                           std::to_string(tokens.size()) + " tokens");
  }
  auto starts = MicroBatchStarts(step, replica, microbatch);
  if (!starts.ok()) return starts.status();
  return ReadSequences(tokens, *starts, spec_.seq_len);
}

Result<SequenceBatch> ReadSequences(const TokenStream& tokens, std::span<const uint64_t> starts, int seq_len) {
  const size_t s = static_cast<size_t>(seq_len);
  SequenceBatch batch;
  batch.inputs.resize(starts.size() * s);
  batch.targets.resize(starts.size() * s);
  for (size_t row = 0; row < starts.size(); ++row) {
    if (!tokens.CopyTo(starts[row], std::span<int32_t>(batch.inputs).subspan(row * s, s)) ||
        !tokens.CopyTo(starts[row] + 1, std::span<int32_t>(batch.targets).subspan(row * s, s))) {
      return Unavailable("reading tokens " + std::to_string(starts[row]) + ".." + std::to_string(starts[row] + s) +
                         " faulted (SIGBUS): the file was truncated or replaced while the job ran");
    }
  }
  return batch;
}

}  // namespace pipecoord::data
