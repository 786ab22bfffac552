// TcpTransport: the Transport over TCP, on Boost.Asio.
//
// Life of one job's transport:
//   auto t = TcpTransport::Listen("0.0.0.0", 0);        // accepts at once; t->endpoint()
//   ... publish the endpoint, learn the peers' (rendezvous) ...
//   t->Connect(my_rank, {{peer_rank, "host:port"}, ...}, session, 30s);
//   ... Send / Recv / Flush ...
//   t->Shutdown();                                      // also done by the destructor
//
// Links: one TCP connection per peer pair; the lower rank dials the higher one. The dialler
// retries (connection refused, reset, no answer) with a short back-off until Connect's timeout,
// so peers may start in any order. Both ends check a handshake (frame.h) carrying the session
// and the ranks: a connection from another session (a stale worker of a previous job), from a
// rank that is not a peer, or to the wrong rank is refused and closed without disturbing the
// other links. Sessions only grow, so a dialler refused by an older session (or by a transport
// shutting down) is early, not wrong: the peer is still closing its previous job on that port,
// and the dialler tries again until the timeout. Refused by a newer session, it is the stale one
// and fails at once. Hellos that arrive before Connect wait, unanswered, until Connect is called
// (at most 1024 of them).
//
// Threads: one io_context driven by `io_threads` threads; each connection's reads and writes
// run on its own strand. Sends are queued per peer and written in order, several frames per
// system call (gathered, no copy of the payload). Arrivals are buffered per (peer, tag).
//
// Failure: a link that breaks (peer closed or crashed, I/O error, a malformed or oversized
// frame) is closed and stays broken: its queued sends are dropped (Flush reports them), its
// waiters wake with the cause, and later Send/Recv on that peer fail at once. A frame header is
// validated before its payload is allocated, so a claimed size is never allocated unchecked.
//
// One TcpTransport serves one job. A daemon that advertises a fixed data endpoint listens on the
// same port again for the next job (the listener sets SO_REUSEADDR); stale connections from the
// previous job are refused by their session.
#ifndef PIPECOORD_WORKER_TRANSPORT_TCP_TRANSPORT_H_
#define PIPECOORD_WORKER_TRANSPORT_TCP_TRANSPORT_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker/transport/transport.h"

namespace pipecoord::worker {

struct TcpTransportOptions {
  // The job's session id, used by the Connect overload without one.
  uint64_t session = 0;
  // Largest payload accepted, in bytes (frames claiming more close the link; Send refuses
  // more). Peers of one job should agree.
  uint64_t max_payload_bytes = uint64_t{1} << 30;  // 1 GiB
  // Threads running the io_context (1 or 2 is plenty: they only move bytes).
  int io_threads = 2;
  // An accepted connection must send its hello within this time, or it is closed.
  std::chrono::milliseconds handshake_timeout{10000};
  // A fault (worker --inject slowlink): each message of a step >= send_delay_from_step is handed
  // to its link send_delay after Send (Send still returns at once; order per peer is kept; Flush
  // waits for them). 0: none.
  std::chrono::milliseconds send_delay{0};
  int32_t send_delay_from_step = 0;
};

class TcpTransport final : public Transport {
 public:
  // Binds host:port (port 0 picks a free port) and starts accepting. UNAVAILABLE naming the
  // address when it cannot be bound; INVALID_ARGUMENT for bad options.
  static Result<std::unique_ptr<TcpTransport>> Listen(const std::string& host, int port,
                                                      const TcpTransportOptions& options = {});

  ~TcpTransport() override;  // Shutdown()
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  // "host:port" actually bound (the port chosen when 0 was asked). Listening on 0.0.0.0 gives
  // "0.0.0.0:port": peers need the host's reachable name or address with that port.
  std::string endpoint() const;

  // Sets up links to `peers` (rank -> "host:port") and waits until all are up. An entry for
  // `my_rank` itself is ignored, so a job's whole endpoint table can be passed. Dials peers of
  // higher rank (retrying until `timeout`) and waits for lower ranks to dial in. Errors:
  // INVALID_ARGUMENT (bad rank or endpoint), FAILED_PRECONDITION (called twice), UNAVAILABLE
  // (refused handshake: names the reason; timeout: names every missing peer and its last
  // error; shutdown). Call once per transport; after an error, Shutdown() it.
  Status Connect(int my_rank, const std::map<int, std::string>& peers, uint64_t session,
                 std::chrono::milliseconds timeout);
  // As above with TcpTransportOptions::session.
  Status Connect(int my_rank, const std::map<int, std::string>& peers,
                 std::chrono::milliseconds timeout);

  // Transport. Bytes are counted on the wire: DATA frame headers and payloads (the
  // handshake is not counted).
  // Sends host tensors only (FAILED_PRECONDITION for device memory: stage it through the host).
  Status Send(int peer, const MessageTag& tag, kernels::Tensor data) override;
  Result<kernels::Tensor> Recv(int peer, const MessageTag& tag, const kernels::TensorSpec& expected,
                               std::chrono::milliseconds timeout) override;
  // Recv of whatever arrived, as raw bytes (u8[n]), for tools and tests that do not know the
  // size in advance.
  Result<kernels::Tensor> RecvBytes(int peer, const MessageTag& tag, std::chrono::milliseconds timeout);
  Status Flush(std::chrono::milliseconds timeout) override;
  void Shutdown() override;
  std::vector<int> BrokenPeers() const override;
  // Peers passed to Connect whose link never came up (and so never broke): after a failed
  // Connect, the ones it waited for. Empty before Connect.
  std::vector<int> UnconnectedPeers() const;
  uint64_t bytes_sent() const override;
  uint64_t bytes_received() const override;

 private:
  class Impl;
  explicit TcpTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_TRANSPORT_TCP_TRANSPORT_H_
