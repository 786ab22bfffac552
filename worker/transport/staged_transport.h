// StagedTransport: device tensors over a transport that carries host tensors (the TCP one), by
// copying through pinned host memory. The path for ranks NCCL cannot connect: two processes
// sharing one GPU (nccl_transport.h refuses them).
//
//   auto tcp = TcpTransport::Listen(...); tcp->Connect(...);
//   StagedTransport t(*tcp, {.device_allocator = &pool, .compute_stream = stream});
//   t.Send(peer, tag, device_tensor);   // returns at once
//   auto x = t.Recv(peer, tag, spec, timeout);   // a device tensor, ready in stream order
//
// Send of a device tensor: a copy stream waits for an event recorded on the compute stream (the
// producer), copies the tensor into a pinned buffer (cudaMemcpyAsync) and records an event; a
// staging thread hands the pinned tensor to the inner transport once that event completed.
// Send returns at once; the device tensor is held until its copy completed (handed off from the
// caller's memory peak: kernels::Tensor::HandOffToTransport), the pinned buffer until the inner
// transport wrote it. Messages to one peer keep their order (host tensors sent
// while device tensors to the same peer are being staged wait behind them).
// Send of a host tensor passes it through to the inner transport.
//
// Recv gets the host tensor from the inner transport (which checks its size). With a device
// allocator it copies it into a pinned buffer and from there into a tensor from the allocator,
// on the compute stream: the allocator's blocks are stream-ordered on that stream, so the copy
// is ordered after their previous users and before the consumer, with no event and no host
// wait. Without a device allocator, Recv returns the host tensor (host-only use, and tests
// without a GPU). Host-only exchanges of a GPU rank (the CPU all-reduce) should use the inner
// transport directly.
//
// Errors: the inner transport's, passed through (its peer and tag in the message). A staged
// send that fails later (a CUDA error, the inner transport refusing it) is reported by Flush and
// by every later Send. Flush waits for the staging queue, then flushes the inner transport.
// Shutdown stops staging and shuts the inner transport down. BrokenPeers and the byte counters
// are the inner transport's (bytes on the wire).
//
// Thread-safe. CUDA is touched only once a device tensor is sent or a device allocator
// receives: a host-only StagedTransport runs without a GPU.
#ifndef PIPECOORD_WORKER_TRANSPORT_STAGED_TRANSPORT_H_
#define PIPECOORD_WORKER_TRANSPORT_STAGED_TRANSPORT_H_

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "kernels/tensor.h"
#include "worker/transport/transport.h"

namespace pipecoord::worker {

struct StagedTransportOptions {
  // Where received tensors go (device memory of one GPU), or null: Recv returns host tensors.
  // Sent device tensors must be on the same device. Must outlive the transport.
  kernels::Allocator* device_allocator = nullptr;
  // The stream that produces sent device tensors and consumes received ones (nullptr: the
  // legacy default stream). Must outlive the transport.
  cudaStream_t compute_stream = nullptr;
};

class StagedTransport final : public Transport {
 public:
  // `inner` carries the host tensors and must outlive this transport (it is not owned).
  StagedTransport(Transport& inner, const StagedTransportOptions& options);
  ~StagedTransport() override;  // Shutdown(), then waits for the copies it issued
  StagedTransport(const StagedTransport&) = delete;
  StagedTransport& operator=(const StagedTransport&) = delete;

  // Transport. Device tensors of another device than the allocator's, or any device tensor
  // without a device allocator: FAILED_PRECONDITION.
  Status Send(int peer, const MessageTag& tag, kernels::Tensor data) override;
  Result<kernels::Tensor> Recv(int peer, const MessageTag& tag, const kernels::TensorSpec& expected,
                               std::chrono::milliseconds timeout) override;
  Status Flush(std::chrono::milliseconds timeout) override;
  void Shutdown() override;
  std::vector<int> BrokenPeers() const override;
  uint64_t bytes_sent() const override;
  uint64_t bytes_received() const override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_TRANSPORT_STAGED_TRANSPORT_H_
