// NcclTransport: the Transport for device tensors between ranks on different GPUs, over NCCL
// point-to-point (ncclSend / ncclRecv).
//
// Life of one job's transport:
//   auto t = NcclTransport::Create(device, compute_stream, device_allocator);
//   t->Connect(my_rank, {prev_stage_rank, next_stage_rank}, session, rendezvous, 60s);
//   ... Send / Recv (device tensors) / Flush ...
//   t->Shutdown();                                      // also done by the destructor
//
// Links and why they cannot deadlock. Each peer pair has TWO 2-rank communicators, one per
// direction: on the low -> high one the lower rank only sends and the higher only receives, and
// the other way round on the other. Each communicator has its own stream on each side. NCCL
// runs the operations of one communicator one after the other and a send's kernel waits until
// the peer posts the matching receive; with a single communicator per pair the crossing
// schedule (both ranks send, then both receive) would queue each rank's receive behind its own
// send, which waits for the other rank's receive: a deadlock. With one communicator per
// direction a send never waits behind a receive, and different peers never share a
// communicator or a stream, so a send to one peer never blocks a receive from another.
// (NCCL_LAUNCH_ORDER_IMPLICIT=1, which orders kernels of different communicators on a device by
// launch, would bring the deadlock back: Connect refuses to run under it.)
//
// Order. NCCL matches the sends and receives of a communicator in issue order, while Transport
// lets Recv ask for tags in any order. Each payload is preceded by a 64-byte header naming its
// tag and spec (nccl_wire.h). Messages are taken off a link in the order they were sent: a Recv
// whose tag has not arrived receives the link's next header (one Recv per peer does so at a
// time), posts the receive of that payload into a new tensor, files it under its tag and goes
// on until its own tag is there. The host waits only for headers (64 bytes, on the comm
// stream); payloads never: the consumer's stream waits for them on the GPU.
// Consequence: a send completes once the peer's transport has taken it off the link, i.e. once
// the peer called Recv for it or for a later message from this rank. Flush therefore waits for
// the peers to receive (the TCP transport's Flush waits for the socket only), and a
// device-wide synchronisation (cudaDeviceSynchronize, cudaFree) waits for them too: allocate
// with a stream-ordered allocator (the caching pool, cudaMallocAsync), never cudaFree, while
// transfers are pending.
//
// Streams. Send sends the header at once, then records an event on the compute stream (the
// producer) and makes the peer's send stream wait on it before the payload: the send overlaps
// the compute queued after it, and the receiver's host need not wait for this rank's GPU. The
// transport holds the tensor until the send completed on the GPU, handed off from the caller's
// memory peak (kernels::Tensor::HandOffToTransport). Recv allocates the tensor from
// `allocator`, makes the receive stream wait for the compute stream's work queued so far (the
// allocator's blocks are stream-ordered on the compute stream: a reused block's previous
// kernels must finish first; NcclTransportOptions::recv_waits_for_compute), posts the receive,
// and makes the compute stream wait for it before returning: no host synchronisation on the
// data. A tensor handed out whose payload had not landed when its link broke holds undefined
// bytes (the job fails on its next transport call anyway).
//
// Connect. Communicators are built at Connect for the listed peers (pipeline neighbours), in two
// rendezvous rounds per pair (low, high): both ranks publish a card naming their GPU
// (nccl_wire::CardKey) and read the other's; then the lower rank publishes the two unique ids
// (ncclGetUniqueId's bytes, nccl_wire::IdsKey) and the higher one reads them. In each round a
// rank publishes everything before it waits for anything, so ranks may start in any order.
// Same GPU: NCCL does not support two ranks of one communicator on one CUDA device ("Using the
// same CUDA device multiple times as different ranks of the same NCCL communicator is not
// supported and may lead to hangs", NCCL User Guide, Creating a Communicator,
// https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/usage/communicators.html); NCCL's
// ncclCommInitRank fails with ncclInvalidUsage "Duplicate GPU detected : rank 0 and rank 1 both
// on CUDA device ..." when two ranks have the same host hash and PCI bus id (src/init.cc; a
// maintainer confirms it is unsupported in https://github.com/NVIDIA/nccl/issues/1241). Connect
// compares the cards before any unique id or communicator exists (same UUID, or same host and
// PCI bus id) and fails with FAILED_PRECONDITION naming both ranks and the GPU; both ranks of
// the pair see it. Use StagedTransport (staged_transport.h) for such ranks. Other pairs of the
// job then time out in Connect: the worker chooses another path for the whole job.
// After creating the communicators (nonblocking, so Connect's timeout holds), each direction of
// each pair exchanges one hello header, pair by pair in (low, high) order, which sets up NCCL's
// lazy connections inside Connect and checks that both ends belong to this session.
//
// Failure. Communicators are nonblocking (ncclConfig_t::blocking = 0): every call is followed
// by polling ncclCommGetAsyncError until it settles, with a deadline. A watchdog thread polls
// every communicator's asynchronous error, releases the tensors of completed sends and checks
// that a payload whose header arrived lands within `stall_timeout`. A link with an error, a
// stalled payload or a call that would not settle is broken: both its communicators are
// aborted (ncclCommAbort makes their kernels quit, so no stream stays blocked), its waiters
// wake with UNAVAILABLE naming the peer, messages that had fully arrived can still be received,
// and the peer is reported by BrokenPeers. A Recv that times out leaves the link as it is (the
// header receive stays posted for the next Recv). Shutdown aborts every communicator.
// NCCL calls of the whole process are made one at a time (NCCL is not thread-safe across
// communicators of one device: NCCL User Guide, Thread Safety).
// The design needs a send kernel and a receive kernel of different communicators to run at once
// on a GPU, as CUDA does for kernels of different streams. Settings that serialise them
// (NCCL_LAUNCH_ORDER_IMPLICIT=1, refused by Connect; CUDA_LAUNCH_BLOCKING=1; possibly
// CUDA_DEVICE_MAX_CONNECTIONS=1, whose single hardware queue can order them) turn the crossing
// schedule into a wait that ends in a Recv timeout instead of a transfer.
//
// Thread-safe. Refuses host tensors (FAILED_PRECONDITION: use the TCP transport, or stage).
#ifndef PIPECOORD_WORKER_TRANSPORT_NCCL_TRANSPORT_H_
#define PIPECOORD_WORKER_TRANSPORT_NCCL_TRANSPORT_H_

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/tensor.h"
#include "worker/transport/nccl_wire.h"
#include "worker/transport/rendezvous.h"
#include "worker/transport/transport.h"

namespace pipecoord::worker {

// Connect takes the job's rendezvous (rendezvous.h's RendezvousFn; the worker wires it to the
// coordinator's Rendezvous RPC); its errors fail Connect with their code.

// The identity NCCL tells `device` by (this host, the GPU's UUID and PCI bus id): what Connect
// publishes in its cards, and what the worker publishes to choose the job's transport
// (transport_choice.h). UNAVAILABLE "no CUDA device: ..." without a GPU; INTERNAL naming the
// CUDA call for other failures.
Result<nccl_wire::DeviceIdentity> LocalDeviceIdentity(int device);

struct NcclTransportOptions {
  // Whether a receive waits for the compute stream's work queued when its tensor was allocated.
  // Needed when the allocator's blocks are stream-ordered on the compute stream (the caching
  // pool, cudaMallocAsync on that stream): a reused block may still be read by earlier kernels.
  // False only for an allocator whose memory is free for any stream once Allocate returns.
  bool recv_waits_for_compute = true;
  // A payload whose header arrived must land within this time, or the link is broken. It waits
  // only for the sender's producer and this rank's compute queue (seconds at most), never for a
  // peer's host.
  std::chrono::milliseconds stall_timeout{60000};
  // How long one NCCL call may stay in progress before the link is broken.
  std::chrono::milliseconds issue_timeout{30000};
  // How often the watchdog looks at the links.
  std::chrono::milliseconds watchdog_period{20};
};

class NcclTransport final : public Transport {
 public:
  // A transport for ranks on `device`: sent tensors are produced, and received ones consumed,
  // on `compute_stream` (a stream of that device, or nullptr for the legacy default stream);
  // received tensors come from `allocator` (device memory of `device`). The stream and the
  // allocator must outlive the transport. UNAVAILABLE "no CUDA device: ..." without a GPU;
  // INVALID_ARGUMENT for a device not present or an allocator of other memory.
  static Result<std::unique_ptr<NcclTransport>> Create(int device, cudaStream_t compute_stream,
                                                       kernels::Allocator& allocator,
                                                       const NcclTransportOptions& options = {});

  ~NcclTransport() override;  // Shutdown(), then frees what no transfer can touch any more
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;

  // Builds the links to `peers` (global ranks, not including `my_rank`) for job `session` and
  // waits until all are up. Errors: INVALID_ARGUMENT (bad ranks), FAILED_PRECONDITION (called
  // twice; two ranks of a pair on one GPU; NCCL_LAUNCH_ORDER_IMPLICIT set), the rendezvous's
  // errors, UNAVAILABLE (timeout naming the peers not up; NCCL errors; shutdown). Call once;
  // after an error, Shutdown() the transport.
  Status Connect(int my_rank, const std::vector<int>& peers, uint64_t session, const RendezvousFn& rendezvous,
                 std::chrono::milliseconds timeout);

  // Transport. Bytes are counted when issued: a 64-byte header plus the payload per message.
  // Device tensors of this transport's device only (FAILED_PRECONDITION otherwise).
  Status Send(int peer, const MessageTag& tag, kernels::Tensor data) override;
  Result<kernels::Tensor> Recv(int peer, const MessageTag& tag, const kernels::TensorSpec& expected,
                               std::chrono::milliseconds timeout) override;
  Status Flush(std::chrono::milliseconds timeout) override;
  void Shutdown() override;
  std::vector<int> BrokenPeers() const override;
  uint64_t bytes_sent() const override;
  uint64_t bytes_received() const override;

  int device() const;

 private:
  class Impl;
  explicit NcclTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_TRANSPORT_NCCL_TRANSPORT_H_
