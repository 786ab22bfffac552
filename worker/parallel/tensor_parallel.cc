#include "worker/parallel/tensor_parallel.h"

#include <algorithm>
#include <string>
#include <utility>

namespace pipecoord::worker::parallel {

RingTensorParallel::RingTensorParallel(Transport* transport, Group group, std::chrono::milliseconds timeout)
    : transport_(transport), group_(std::move(group)), timeout_(timeout) {}

int RingTensorParallel::NextStep() {
  const int step = calls_;
  calls_ = calls_ == INT32_MAX ? 0 : calls_ + 1;
  return step;
}

template <typename Collective>
Status RingTensorParallel::Run(const char* name, FloatBuffer& buffer, Collective collective) {
  if (transport_ == nullptr) return status_ = FailedPrecondition(std::string(name) + ": no transport bound yet");
  const auto start = std::chrono::steady_clock::now();
  status_ = collective(*transport_, group_, NextStep(), buffer,
                       RingOptions{timeout_, kTensorParallelChannel, &bytes_sent_});
  comm_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  return status_;
}

// The host spans' calls: their size checks, then the buffer calls on HostFloats.
Status RingTensorParallel::ReduceFromTensorParallel(std::span<float> data) {
  HostFloats buffer(data);
  return ReduceFromTensorParallel(buffer);
}

Status RingTensorParallel::GatherFromTensorParallel(std::span<const float> mine, std::span<float> out) {
  const int n = size();
  if (out.size() != mine.size() * static_cast<size_t>(n)) {
    return status_ = InvalidArgument("GatherFromTensorParallel: out holds " + std::to_string(out.size()) + " floats, need " +
                           std::to_string(mine.size() * n) + " (" + std::to_string(n) + " x " +
                           std::to_string(mine.size()) + ")");
  }
  if (!status_.ok()) return status_;
  std::copy(mine.begin(), mine.end(), out.begin() + static_cast<size_t>(group_.me) * mine.size());
  HostFloats buffer(out);
  return GatherFromTensorParallel(buffer);
}

Status RingTensorParallel::ReduceFromTensorParallel(FloatBuffer& data) {
  if (!status_.ok() || size() == 1) return status_;
  return Run("ReduceFromTensorParallel", data, AllReduceSum);
}

Status RingTensorParallel::GatherFromTensorParallel(FloatBuffer& all) {
  const int n = size();
  if (all.size() % static_cast<size_t>(n) != 0) {
    return status_ = InvalidArgument("GatherFromTensorParallel: the buffer holds " + std::to_string(all.size()) +
                                     " floats, not a multiple of the group's " + std::to_string(n) + " ranks");
  }
  if (!status_.ok() || n == 1) return status_;
  return Run("GatherFromTensorParallel", all, AllGather);
}

Status RingTensorParallel::ReduceScatterToSequenceParallel(FloatBuffer& partial) {
  const int n = size();
  if (partial.size() % static_cast<size_t>(n) != 0) {
    return status_ = InvalidArgument("ReduceScatterToSequenceParallel: the buffer holds " + std::to_string(partial.size()) +
                                     " floats, not a multiple of the group's " + std::to_string(n) + " ranks");
  }
  if (!status_.ok() || n == 1) return status_;
  // The ring's chunk r is [r L / n, (r+1) L / n): exactly this rank's rows.
  return Run("ReduceScatterToSequenceParallel", partial, ReduceScatterSum);
}

kernels::HostBuffer<float> GatherSequence(TensorParallel& tp, std::span<const float> mine) {
  kernels::HostBuffer<float> all(mine.size() * static_cast<size_t>(tp.size()));
  (void)tp.GatherFromTensorParallel(mine, all);
  return all;
}

kernels::HostBuffer<float> ScatterSequence(TensorParallel& tp, kernels::HostBuffer<float> partial) {
  kernels::HostBuffer<float> mine(partial.size() / static_cast<size_t>(tp.size()));
  (void)tp.ReduceScatterToSequenceParallel(partial, mine);
  return mine;
}

Status RingTensorParallel::ReduceScatterToSequenceParallel(std::span<float> partial, std::span<float> out) {
  const int n = size();
  if (partial.size() != out.size() * static_cast<size_t>(n)) {
    return status_ = InvalidArgument("ReduceScatterToSequenceParallel: partial holds " + std::to_string(partial.size()) +
                                     " floats, need " + std::to_string(out.size() * n) + " (" + std::to_string(n) +
                                     " x " + std::to_string(out.size()) + ")");
  }
  if (!status_.ok()) return status_;
  const size_t at = static_cast<size_t>(group_.me) * out.size();
  HostFloats buffer(partial);
  if (!ReduceScatterToSequenceParallel(buffer).ok()) return status_;
  std::copy(partial.begin() + static_cast<std::ptrdiff_t>(at), partial.begin() + static_cast<std::ptrdiff_t>(at + out.size()),
            out.begin());
  return Status::Ok();
}

}  // namespace pipecoord::worker::parallel
