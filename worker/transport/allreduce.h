// AllReduceSum: a ring all-reduce (reduce-scatter, then all-gather) of float sums over a
// Transport, for data-parallel gradient sums.
//
// Members are the ranks of `group_ranks`, in that order around the ring: member i sends to
// member i+1 and receives from member i-1 (mod n). The data is cut into n chunks,
// chunk c = [c*L/n, (c+1)*L/n) (sizes differ by at most one; when L < n some are empty and are
// still exchanged, as empty messages). Reduce-scatter: in round s = 0..n-2 member i sends chunk
// (i-s) mod n and adds the chunk (i-s-1) mod n it receives into its own (own = received + own),
// so member i ends holding the whole sum of chunk (i+1) mod n. All-gather: in rounds
// n-1..2n-3 each member forwards the finished chunks around the ring, overwriting its own.
//
// Determinism: each element's sum is computed once, by one member, in a fixed order (chunk c
// adds members c, c+1, ..., c-1 mod n, left to right) and then copied bit for bit, so every
// member ends with bit-identical values, and the same inputs give the same bits on every run.
// The order depends on the chunk, so it may differ in the last bits from a plain sum over
// members 0..n-1.
//
// Messages use tag {channel, stage = round, mb = chunk, step}; two all-reduces in flight at
// once between the same ranks need different steps or channels.
#ifndef PIPECOORD_WORKER_TRANSPORT_ALLREDUCE_H_
#define PIPECOORD_WORKER_TRANSPORT_ALLREDUCE_H_

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "worker/transport/transport.h"

namespace pipecoord::worker {

// Replaces `data` with the element-wise sum of every member's `data` (all members pass the same
// length). `my_index` is this member's index in `group_ranks`. A group of one is a no-op.
// INVALID_ARGUMENT for a bad index, repeated ranks or a channel below kFirstCollectiveChannel;
// UNAVAILABLE when a transfer fails or `timeout` (for the whole operation) passes, naming the
// round, chunk and rank; INTERNAL when a member sent a chunk of the wrong length (the members
// disagree on the data length). On error `data` holds partial sums.
Status AllReduceSum(Transport& transport, int my_index, const std::vector<int>& group_ranks,
                    int step, std::span<float> data, std::chrono::milliseconds timeout,
                    uint32_t channel = kFirstCollectiveChannel);

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_TRANSPORT_ALLREDUCE_H_
