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

// A ring all-reduce sends 2 (n - 1) chunks of about L / n elements; an all-gather n - 1.
Status RingTensorParallel::ReduceFromTensorParallel(std::span<float> data) {
  const int n = size();
  if (!status_.ok() || n == 1) return status_;
  if (transport_ == nullptr) return status_ = FailedPrecondition("ReduceFromTensorParallel: no transport bound yet");
  HostFloats buffer(data);
  const int step = NextStep();
  const auto start = std::chrono::steady_clock::now();
  status_ = AllReduceSum(*transport_, group_, step, buffer, {timeout_, kTensorParallelChannel});
  comm_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  if (!status_.ok()) return status_;
  for (int s = 0; s < n - 1; ++s) {
    for (int c : {((group_.me - s) % n + n) % n, ((group_.me + 1 - s) % n + n) % n}) {
      bytes_sent_ += (ChunkBegin(data.size(), n, c + 1) - ChunkBegin(data.size(), n, c)) * sizeof(float);
    }
  }
  return Status::Ok();
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
  if (n == 1) return Status::Ok();
  if (transport_ == nullptr) return status_ = FailedPrecondition("GatherFromTensorParallel: no transport bound yet");
  HostFloats buffer(out);
  const int step = NextStep();
  const auto start = std::chrono::steady_clock::now();
  status_ = AllGather(*transport_, group_, step, buffer, {timeout_, kTensorParallelChannel});
  comm_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  if (!status_.ok()) return status_;
  bytes_sent_ += static_cast<uint64_t>(n - 1) * mine.size() * sizeof(float);
  return Status::Ok();
}

}  // namespace pipecoord::worker::parallel
