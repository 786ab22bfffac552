// Collectives over a group of a job's ranks: ring all-reduce, reduce-scatter and all-gather of
// f32 data on any Transport, written once for host spans and for device buffers (a GPU's
// gradients), for data parallelism (gradient reduction, ZeRO's sharded optimizer) and tensor
// parallelism (Megatron's f/g all-reduces, sequence parallelism's gather and scatter).
//
// Chunks. A buffer of L elements is cut into n = group size chunks, chunk c = [c*L/n, (c+1)*L/n)
// (sizes differ by at most one; when L < n some are empty and are still exchanged, as empty
// messages). Member i of a group sends to member i+1 and receives from member i-1 (mod n).
//
//   ReduceScatterSum  member i ends with chunk i = the sum of every member's chunk i; its other
//                     chunks hold partial sums (unspecified)
//   AllGather         every member ends with every chunk c = member c's chunk c
//   AllReduceSum      every member ends with every element summed over the members
//
// Determinism: each element's sum is computed once, by one member, adding the members' values
// one at a time (received + own, in f32) in a fixed order, and then copied bit for bit, so every
// member ends bit-identical and the same inputs give the same bits on every run. The order:
// AllReduceSum sums chunk c over members c, c+1, ..., c-1 (mod n), left to right (the order
// pipecoord's data-parallel runs have always used); ReduceScatterSum sums chunk c over members
// c+1, c+2, ..., c (mod n). Either may differ in the last bits from a plain sum over 0..n-1.
//
// Messages: tag {channel, stage = round, mb = chunk, step}, f32[chunk length]. Two collectives in
// flight at once between the same ranks need different steps or channels (channels >=
// kFirstCollectiveChannel; 0 and 1 carry the pipeline's activations and gradients).
//
// Errors: INVALID_ARGUMENT for a bad group (empty, repeated ranks, index out of range) or a
// channel below kFirstCollectiveChannel; UNAVAILABLE when a transfer fails or `timeout` (for the
// whole collective) passes; INTERNAL when a member sent a chunk of another length (the members
// disagree on the data length); a buffer's own errors. Each message names the collective, the
// step, the member, the round, the chunk and the peer. On error the buffer holds partial results.
// A group of one returns at once, the data unchanged.
//
// Thread safety: a call uses only its arguments; calls on different channels or steps may run at
// once on one Transport (which is thread-safe).
#ifndef PIPECOORD_WORKER_PARALLEL_COLLECTIVES_H_
#define PIPECOORD_WORKER_PARALLEL_COLLECTIVES_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "kernels/tensor.h"
#include "worker/transport/transport.h"

namespace pipecoord::worker::parallel {

// The members of one collective in ring order (e.g. a RankLayout group) and this rank's index.
struct Group {
  std::vector<int> ranks;  // global ranks, distinct
  int me = 0;              // this rank's index in `ranks`
};

// f32 data as a ring sees it: element k of whatever holds it (a span of host memory, a backend's
// gradients on the device, in a fixed order that is the same on every member).
class FloatBuffer {
 public:
  virtual ~FloatBuffer() = default;
  virtual size_t size() const = 0;
  // A new tensor f32[count] holding elements [begin, begin + count), in memory the transport
  // sends from; ready in the order the transport waits for (a device's: the compute stream).
  virtual Result<kernels::Tensor> Read(size_t begin, size_t count) = 0;
  // Element begin + k = chunk[k] + element begin + k (one f32 addition, received first).
  virtual Status Add(size_t begin, const kernels::Tensor& chunk) = 0;
  // Element begin + k = chunk[k].
  virtual Status Write(size_t begin, const kernels::Tensor& chunk) = 0;
  // Elements [begin, begin + count) = element * factor (one f32 multiplication): a mean after a
  // sum (a reduce-scatter's: only the chunk this member holds).
  virtual Status Scale(size_t begin, size_t count, float factor) = 0;
};

// Host memory the caller owns and keeps alive for the buffer's life: one span, or the
// concatenation of several (a backend's gradient buffers, in place, without a flat copy).
class HostFloats final : public FloatBuffer {
 public:
  explicit HostFloats(std::span<float> data) : HostFloats(std::vector<std::span<float>>{data}) {}
  explicit HostFloats(std::vector<std::span<float>> parts);
  size_t size() const override { return size_; }
  Result<kernels::Tensor> Read(size_t begin, size_t count) override;
  Status Add(size_t begin, const kernels::Tensor& chunk) override;
  Status Write(size_t begin, const kernels::Tensor& chunk) override;
  Status Scale(size_t begin, size_t count, float factor) override;

 private:
  // Calls f(part, offset in the chunk) for the pieces of [begin, begin + count) in each part.
  template <typename F>
  void ForEachPiece(size_t begin, size_t count, F f);

  std::vector<std::span<float>> parts_;
  size_t size_ = 0;
};

struct RingOptions {
  std::chrono::milliseconds timeout{60000};  // for the whole collective
  uint32_t channel = kFirstCollectiveChannel;
  uint64_t* bytes_sent = nullptr;  // if set, the bytes of every chunk this member sends are added
};

// First element of chunk c of a buffer of `len` elements cut into n chunks (c in 0..n).
inline size_t ChunkBegin(size_t len, int n, int c) {
  return static_cast<size_t>(c) * len / static_cast<size_t>(n);
}

Status AllReduceSum(Transport& transport, const Group& group, int step, FloatBuffer& data, const RingOptions& options);
Status ReduceScatterSum(Transport& transport, const Group& group, int step, FloatBuffer& data,
                        const RingOptions& options);
Status AllGather(Transport& transport, const Group& group, int step, FloatBuffer& data, const RingOptions& options);

// AllReduceSum of host floats (the concatenation of `data`), then times 1/n: the mean over the
// members.
Status AllReduceMean(Transport& transport, const Group& group, int step, std::vector<std::span<float>> data,
                     const RingOptions& options);

// ReduceScatterSum, then this member's chunk times 1/n: member i holds the mean of chunk i over
// the members (ZeRO's gradient reduction); its other chunks are unspecified. On any buffer (a
// device's gradients too), or on host floats.
Status ReduceScatterMean(Transport& transport, const Group& group, int step, FloatBuffer& data,
                         const RingOptions& options);
Status ReduceScatterMean(Transport& transport, const Group& group, int step, std::vector<std::span<float>> data,
                         const RingOptions& options);

}  // namespace pipecoord::worker::parallel

#endif  // PIPECOORD_WORKER_PARALLEL_COLLECTIVES_H_
