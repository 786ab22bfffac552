// Transport: point-to-point messages between the ranks of one job.
//
// Pipeline neighbours exchange activations (forward) and gradients (backward); data-parallel
// replicas exchange gradient chunks for an all-reduce (worker/parallel/collectives.h). A message is one tensor
// (kernels/tensor.h) identified by its sender and a MessageTag; the receiver names the spec
// (dtype and shape) it expects, since a pipeline neighbour always knows it and NCCL needs it.
// The TCP transport carries host tensors; the NCCL transport device tensors. Sends are
// asynchronous so they overlap compute; a receive may be posted before its message arrives and
// messages may be received in any order.
//
// Every method is thread-safe. Errors are values: a broken link, a timeout or a shutdown is
// reported as Code::kUnavailable with a message naming the peer and the tag; nothing hangs.
#ifndef PIPECOORD_WORKER_TRANSPORT_TRANSPORT_H_
#define PIPECOORD_WORKER_TRANSPORT_TRANSPORT_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/tensor.h"

namespace pipecoord::worker {

// Identifies one message of a job: which channel, stage, micro-batch and step.
struct MessageTag {
  uint32_t channel = 0;  // 0 activations (F), 1 gradients (B), 2+ collectives (all-reduce chunks)
  int32_t stage = 0;
  int32_t mb = 0;
  int32_t step = 0;
  friend bool operator==(const MessageTag&, const MessageTag&) = default;
};

inline constexpr uint32_t kActivationChannel = 0;
inline constexpr uint32_t kGradientChannel = 1;
inline constexpr uint32_t kFirstCollectiveChannel = 2;

// "{channel 1, stage 3, mb 5, step 7}"
std::string ToString(const MessageTag& tag);

class Transport {
 public:
  virtual ~Transport() = default;

  // Queues `data` for `peer` and returns at once (asynchronous, so sends overlap compute); the
  // transport holds the tensor until it is sent. Messages to one peer are delivered in order.
  // Fails if the peer is unknown (NOT_FOUND), the link broke (UNAVAILABLE) or the tensor lives
  // where this transport cannot send from (FAILED_PRECONDITION naming both).
  virtual Status Send(int peer, const MessageTag& tag, kernels::Tensor data) = 0;

  // Waits until the message `tag` from `peer` has arrived and returns it as a tensor of
  // `expected` (INTERNAL naming both when the sender sent another size: the ranks disagree on
  // the model). Several messages with the same key are returned first in, first out.
  // UNAVAILABLE naming the peer and tag after `timeout`, or at once if the link to that peer
  // broke (a message that arrived before the break is still returned) or Shutdown() was
  // called: never a hang.
  virtual Result<kernels::Tensor> Recv(int peer, const MessageTag& tag, const kernels::TensorSpec& expected,
                                       std::chrono::milliseconds timeout) = 0;

  // Host f32 conveniences over Send and Recv (the CPU backend's all-reduce, tests).
  Status SendFloats(int peer, const MessageTag& tag, std::vector<float> data);
  Result<std::vector<float>> RecvFloats(int peer, const MessageTag& tag, size_t count,
                                        std::chrono::milliseconds timeout);

  // Blocks until every queued send has been written (or failed); used at step boundaries.
  // UNAVAILABLE when a send failed (the first failure is reported, and stays reported), on
  // timeout, or after Shutdown().
  virtual Status Flush(std::chrono::milliseconds timeout) = 0;

  // Wakes every waiter with an error and closes links; idempotent, returns promptly.
  virtual void Shutdown() = 0;

  // The peers whose link broke (closed or reset by the other side) before Shutdown(), in rank
  // order: who to suspect when a job fails with UNAVAILABLE.
  virtual std::vector<int> BrokenPeers() const = 0;

  // Bytes sent / received so far (telemetry).
  virtual uint64_t bytes_sent() const = 0;
  virtual uint64_t bytes_received() const = 0;
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_TRANSPORT_TRANSPORT_H_
