// DeviceAllReduceSum: allreduce.h's ring all-reduce for floats the ring cannot touch itself
// (a GPU's gradients): the same members, chunks, rounds, message tags and order of additions,
// but each chunk is read out as a tensor to send, and each received chunk tensor is added or
// copied in by the buffer (on the device, with its own kernels). Used by the executor's OPT when
// the backend's gradients live on the device (ComputeBackend::DeviceGradients).
//
// Determinism, as allreduce.h's: chunk c's sum is computed once, by member c - 1 mod n, as
// received + own in the order c, c+1, ..., c-1 (mod n), then copied bit for bit, so every member
// ends bit-identical; with a buffer whose Add computes received + own in f32 (one rounding per
// element) the result equals AllReduceSum's on the same inputs bit for bit. Chunk c travels as
// f32[count] (count = its length; an empty chunk as f32[0]), under tag {channel, stage = round,
// mb = chunk, step}.
#ifndef PIPECOORD_WORKER_TRANSPORT_DEVICE_ALLREDUCE_H_
#define PIPECOORD_WORKER_TRANSPORT_DEVICE_ALLREDUCE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "kernels/tensor.h"
#include "worker/transport/transport.h"

namespace pipecoord::worker {

// An f32 buffer of size() elements, as the ring sees it: element k of the concatenation of
// whatever tensors hold it (a backend's gradients, in a fixed order that is the same on every
// replica). Errors name what failed (a device call, a chunk of the wrong spec).
class DeviceFloatBuffer {
 public:
  virtual ~DeviceFloatBuffer() = default;
  virtual size_t size() const = 0;
  // A new tensor f32[count] holding elements [begin, begin + count), in memory the transport
  // sends from; ready in the order the transport waits for (a device's: the compute stream).
  virtual Result<kernels::Tensor> Read(size_t begin, size_t count) = 0;
  // Element begin + k = chunk[k] + element begin + k (one f32 addition, received first), for k
  // in [0, chunk.numel()).
  virtual Status Add(size_t begin, const kernels::Tensor& chunk) = 0;
  // Element begin + k = chunk[k].
  virtual Status Write(size_t begin, const kernels::Tensor& chunk) = 0;
  // Every element = element * factor (one f32 multiplication): the mean after the sum.
  virtual Status Scale(float factor) = 0;
};

// Replaces `data` with the element-wise sum of every member's `data` (all members have the same
// size). Arguments, errors and timeout as AllReduceSum's (allreduce.h): INVALID_ARGUMENT for a
// bad index, repeated ranks or a channel below kFirstCollectiveChannel; UNAVAILABLE when a
// transfer fails or `timeout` passes, naming the round, chunk and rank; INTERNAL when a member
// sent a chunk of another length; the buffer's errors, naming the round and chunk. A group of one
// is a no-op. On error `data` holds partial sums.
Status DeviceAllReduceSum(Transport& transport, int my_index, const std::vector<int>& group_ranks, int step,
                          DeviceFloatBuffer& data, std::chrono::milliseconds timeout,
                          uint32_t channel = kFirstCollectiveChannel);

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_TRANSPORT_DEVICE_ALLREDUCE_H_
