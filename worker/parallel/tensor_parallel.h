// TensorParallel: the collectives one stage's tensor-parallel ranks run inside its F and B, in
// Megatron-LM's terms (tensor_parallel/mappings.py):
//
//   ReduceFromTensorParallel  g: after a row-parallel layer (wo, w2, the vocabulary-parallel
//                             embedding) in F, and after the column-parallel layers' input
//                             gradients (f's backward: wq/wk/wv, w1/w3, the LM head) in B: the
//                             partial sums of the group's ranks added, in place
//   GatherFromTensorParallel  every rank's slice side by side (the vocabulary-parallel
//                             cross-entropy's row maxima; with sequence parallelism the token
//                             shards before each tensor-parallel region in F, and the output
//                             gradients in B: gather_from_sequence_parallel_region)
//   ReduceScatterToSequenceParallel  sequence parallelism's g: a row-parallel layer's partial
//                             output (and, in B, the column-parallel layers' partial input
//                             gradient) summed over the group, each rank keeping its shard of
//                             the rows (reduce_scatter_to_sequence_parallel_region)
//
// The model layer (worker/model/) calls these and nothing else; a stage with tp = 1 has no
// TensorParallel (null) and calls nothing. The ranks of a group call the same collectives in the
// same order (they run the same job list in lockstep); each call blocks until the group's ranks
// all made it. Results are bit-identical on every rank of the group (collectives.h's ring), so
// replicated tensors (norm weights, residual streams) stay identical across the group.
//
// Not thread-safe: one caller (the rank's executor thread) at a time. Errors (a broken link, a
// timeout) are Status values naming the collective, the call's sequence number and the peer, and
// they are sticky: after the first, every call fails at once with it and status() returns it, so
// a layer's F or B may run to its end and its caller checks status() once (a failed collective
// leaves garbage in the tensors, which the caller then discards with the action).
#ifndef PIPECOORD_WORKER_PARALLEL_TENSOR_PARALLEL_H_
#define PIPECOORD_WORKER_PARALLEL_TENSOR_PARALLEL_H_

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/host_pool.h"
#include "common/status.h"
#include "worker/parallel/collectives.h"
#include "worker/transport/transport.h"

namespace pipecoord::worker::parallel {

class TensorParallel {
 public:
  virtual ~TensorParallel() = default;
  virtual int size() const = 0;  // tp
  virtual int rank() const = 0;  // this rank's index in the group, 0..tp-1
  // In place: data = the sum over the group's ranks of their `data` (all the same length).
  virtual Status ReduceFromTensorParallel(std::span<float> data) = 0;
  // out[i * n, (i + 1) * n) = rank i's `mine`, n = mine.size() (the same on every rank);
  // out.size() == n * size().
  virtual Status GatherFromTensorParallel(std::span<const float> mine, std::span<float> out) = 0;
  // out = elements [r n, (r+1) n) of the sum over the group's ranks of `partial` (r = rank(),
  // n = out.size(), partial.size() == n * size()); `partial` is used as scratch (unspecified after).
  virtual Status ReduceScatterToSequenceParallel(std::span<float> partial, std::span<float> out) = 0;
  // The same three on a FloatBuffer (a device tensor's floats: worker/cuda's DeviceTensorFloats),
  // in place, with the host spans' ring (so the same bits):
  //   ReduceFromTensorParallel  data = the group's sum
  //   GatherFromTensorParallel  `all` holds n * size() floats, this rank's n at [rank() n,
  //                             (rank() + 1) n) on entry; every rank's slices on return
  //   ReduceScatterToSequenceParallel  `partial` holds n * size() floats; on return its elements
  //                             [rank() n, (rank() + 1) n) are the group's sum (the others are
  //                             unspecified)
  virtual Status ReduceFromTensorParallel(FloatBuffer& data) = 0;
  virtual Status GatherFromTensorParallel(FloatBuffer& all) = 0;
  virtual Status ReduceScatterToSequenceParallel(FloatBuffer& partial) = 0;
  // Bytes this rank sent in its collectives so far (the closed-form communication checks).
  virtual uint64_t bytes_sent() const = 0;
  // Wall time spent inside its collectives so far, ns (telemetry: ActionTiming.tp_comm_ns).
  virtual int64_t comm_ns() const = 0;
  // OK, or the first error of any call (sticky).
  virtual Status status() const = 0;
};

// Sequence parallelism's two mapping points over a group, as new vectors (errors are the group's,
// sticky: the caller checks tp.status()):
//   GatherSequence   every rank's token shard `mine` in rank order: all the tokens
//                    (Megatron's gather_from_sequence_parallel_region)
//   ScatterSequence  this rank's rows of the group's sum of `partial`
//                    (reduce_scatter_to_sequence_parallel_region)
kernels::HostBuffer<float> GatherSequence(TensorParallel& tp, std::span<const float> mine);
kernels::HostBuffer<float> ScatterSequence(TensorParallel& tp, kernels::HostBuffer<float> partial);

// TensorParallel over a rank's Transport: collectives.h's ring on the group's ranks, on channel
// kTensorParallelChannel with the call's sequence number as the step (the ranks count their
// calls alike), so tensor-parallel messages never meet a pipeline's or a gradient reduction's.
class RingTensorParallel final : public TensorParallel {
 public:
  static constexpr uint32_t kTensorParallelChannel = 1u << 20;

  // transport may be null and bound later (Bind), before the first collective: a rank builds its
  // stages before it is handed its transport. A collective without one fails FAILED_PRECONDITION.
  RingTensorParallel(Transport* transport, Group group, std::chrono::milliseconds timeout);
  // Binds the group to `transport` and starts it afresh: the call count restarts at 0 and a sticky
  // error is forgotten. A rank's first data plane, and each new one of an in-place recovery (the
  // old one died with a rank): every rank of the group rebinds before its first collective on it,
  // so their counts agree again (a spare's group starts at 0 too).
  void Bind(Transport* transport) {
    transport_ = transport;
    calls_ = 0;
    status_ = Status::Ok();
  }
  int size() const override { return static_cast<int>(group_.ranks.size()); }
  int rank() const override { return group_.me; }
  Status ReduceFromTensorParallel(std::span<float> data) override;
  Status GatherFromTensorParallel(std::span<const float> mine, std::span<float> out) override;
  Status ReduceScatterToSequenceParallel(std::span<float> partial, std::span<float> out) override;
  Status ReduceFromTensorParallel(FloatBuffer& data) override;
  Status GatherFromTensorParallel(FloatBuffer& all) override;
  Status ReduceScatterToSequenceParallel(FloatBuffer& partial) override;
  uint64_t bytes_sent() const override { return bytes_sent_; }
  int64_t comm_ns() const override { return comm_ns_; }
  Status status() const override { return status_; }

 private:
  int NextStep();
  // Runs one collective of the group on its channel, timing it and counting what it sends.
  template <typename Collective>
  Status Run(const char* name, FloatBuffer& buffer, Collective collective);

  Transport* transport_;
  Group group_;
  std::chrono::milliseconds timeout_;
  int32_t calls_ = 0;
  uint64_t bytes_sent_ = 0;
  int64_t comm_ns_ = 0;
  Status status_;
};

}  // namespace pipecoord::worker::parallel

#endif  // PIPECOORD_WORKER_PARALLEL_TENSOR_PARALLEL_H_
