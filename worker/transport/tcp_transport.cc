#include "worker/transport/tcp_transport.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <limits>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <thread>

#include "worker/transport/endpoint.h"
#include "worker/transport/frame.h"

namespace pipecoord::worker {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using Strand = asio::strand<asio::io_context::executor_type>;
using boost::system::error_code;
using std::chrono::milliseconds;

// Composed reads and writes move at most 64 KiB per system call by default; megabyte payloads
// go faster in larger steps.
size_t LargeSteps(const error_code& ec, size_t /*bytes_so_far*/) {
  return ec ? 0 : (size_t{4} << 20);
}

// A write gathers at most this many queued frames (and stops adding once this many bytes).
constexpr size_t kMaxBatchFrames = 64;
constexpr size_t kMaxBatchBytes = size_t{16} << 20;

// Hellos read before Connect wait for it; beyond this many, further ones are closed.
constexpr size_t kMaxParked = 1024;

constexpr milliseconds kFirstBackoff{10};
constexpr int32_t kMinInt = std::numeric_limits<int32_t>::min();
constexpr milliseconds kMaxBackoff{200};

std::string Describe(const error_code& ec) {
  if (ec == asio::error::eof) return "the peer closed the connection (it shut down or exited)";
  if (ec == asio::error::connection_reset) {
    return "connection reset by the peer (it crashed, or closed with data unread)";
  }
  if (ec == asio::error::connection_refused) return "connection refused (nothing listening yet)";
  if (ec == asio::error::operation_aborted) return "cancelled";
  return ec.message();
}

std::string MsText(milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

struct InboxKey {
  int peer;
  uint32_t channel;
  int32_t stage;
  int32_t mb;
  int32_t step;
  auto operator<=>(const InboxKey&) const = default;
};

InboxKey KeyOf(int peer, const MessageTag& t) { return {peer, t.channel, t.stage, t.mb, t.step}; }

struct OutFrame {
  HeaderBytes header;
  kernels::Tensor payload;  // host memory, held until written
  std::chrono::steady_clock::time_point due{};  // not written before (TcpTransportOptions::send_delay)
};

// One TCP connection: while handshaking, then (once a peer's handshake picked it) that peer's
// link. Everything but `closed` and `peer` is touched only on `strand`.
struct Conn {
  explicit Conn(asio::io_context& io)
      : strand(asio::make_strand(io)), socket(strand), timer(strand), delay_timer(strand) {}

  Strand strand;
  tcp::socket socket;
  asio::steady_timer timer;    // handshake deadline
  asio::steady_timer delay_timer;  // the next delayed send's due time (send_delay)
  std::string remote;          // the other end, "host:port", for messages
  bool handshake_done = false;
  FrameHeader hello;           // accepting side: the hello read, answered once Connect ran
  HeaderBytes out_control{};   // the handshake frame being written
  HeaderBytes in_header{};
  MessageTag in_tag;
  kernels::Tensor in_payload;  // u8[payload_bytes]
  // Guarded by Impl::mu_ (written on the strand).
  bool closed = false;
  int peer = -1;               // the rank, once the handshake assigned this link to it
};

// What we know about one peer of the job. Guarded by Impl::mu_.
struct PeerState {
  std::string endpoint;
  bool dial = false;            // we dial it (its rank is higher)
  std::shared_ptr<Conn> conn;   // its link, once a handshake picked one
  bool up = false;              // handshake complete: frames flow
  Status error;                 // set once the link broke; stays
  bool broke = false;           // the link broke while the transport was running (not Shutdown)
  std::string last_attempt;     // for Connect's timeout message
  std::deque<OutFrame> queue;   // sends not yet handed to the socket
  bool writing = false;         // a write of this peer's queue is posted or in flight
};

}  // namespace

class TcpTransport::Impl {
 public:
  explicit Impl(const TcpTransportOptions& options)
      : options_(options), work_(asio::make_work_guard(io_)), acceptor_(io_), accept_retry_(io_) {}
  ~Impl() { Shutdown(); }

  Status Open(const std::string& host, int port);
  std::string endpoint() const { return endpoint_; }
  Status Connect(int my_rank, const std::map<int, std::string>& peers, uint64_t session,
                 milliseconds timeout);
  Status Send(int peer, const MessageTag& tag, kernels::Tensor data);
  Result<kernels::Tensor> Recv(int peer, const MessageTag& tag, milliseconds timeout);
  Status Flush(milliseconds timeout);
  void Shutdown();
  std::vector<int> BrokenPeers() const;
  std::vector<int> UnconnectedPeers() const;
  uint64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }
  uint64_t bytes_received() const { return bytes_received_.load(std::memory_order_relaxed); }
  const TcpTransportOptions& options() const { return options_; }

 private:
  using ConnPtr = std::shared_ptr<Conn>;

  void RunIo();
  void StartAccept();
  bool Track(const ConnPtr& conn);
  // Closes a connection (on its strand). When it is a peer's link, the peer becomes broken
  // with `why`: its queued sends are dropped and its waiters wake.
  void CloseConn(const ConnPtr& conn, const std::string& why);

  // Accepting side.
  void OnAccepted(const ConnPtr& conn);
  void OnHello(const ConnPtr& conn, const error_code& ec);
  void AnswerHello(const ConnPtr& conn);

  // Dialling side.
  void Dial(int peer, const HostPort& hp, Clock::time_point deadline, milliseconds backoff);
  void DialFailed(const ConnPtr& conn, int peer, const HostPort& hp, Clock::time_point deadline,
                  milliseconds backoff, const std::string& why);
  void OnDialReply(const ConnPtr& conn, int peer, const HostPort& hp, Clock::time_point deadline,
                   milliseconds backoff, const error_code& ec);
  void FailConnect(const ConnPtr& conn, const std::string& message);

  // Links.
  void LinkUp(const ConnPtr& conn);
  void ReadHeader(const ConnPtr& conn);
  void OnHeader(const ConnPtr& conn, const error_code& ec);
  void Deliver(const ConnPtr& conn, uint64_t payload_bytes);
  void StartWrite(const ConnPtr& conn);

  // Under mu_.
  std::string PeerName(int rank) const;
  void DropQueue(int rank, PeerState& p, const std::string& why);
  std::string KnownPeers() const;

  const TcpTransportOptions options_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  tcp::acceptor acceptor_;         // used by one accept chain at a time
  asio::steady_timer accept_retry_;
  std::vector<std::thread> threads_;
  std::string endpoint_;
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_received_{0};

  mutable std::mutex mu_;
  std::condition_variable cv_;  // inbox, link states, pending sends, shutdown
  bool shutdown_ = false;
  bool connect_called_ = false;
  bool connect_over_ = false;   // Connect returned: no more dial retries
  int my_rank_ = -1;
  uint64_t session_ = 0;
  Status connect_error_;        // a fatal handshake answer (refused, malformed)
  std::map<int, PeerState> peers_;
  std::set<ConnPtr> conns_;     // every open connection, closed by Shutdown
  std::vector<ConnPtr> parked_; // hellos read before Connect, answered by Connect
  std::map<InboxKey, std::deque<kernels::Tensor>> inbox_;  // u8 payloads
  uint64_t pending_sends_ = 0;  // queued or being written
  Status send_error_;           // the first send that failed
};

// ---------------------------------------------------------------------------------------------
// Set-up and teardown.

Status TcpTransport::Impl::Open(const std::string& host, int port) {
  const std::string where = "Listen on " + FormatHostPort(host, port);
  if (port < 0 || port > 65535) {
    return InvalidArgument(where + ": port must be in 0..65535, got " + std::to_string(port));
  }
  if (options_.io_threads < 1 || options_.io_threads > 64) {
    return InvalidArgument(where + ": io_threads must be in 1..64, got " +
                           std::to_string(options_.io_threads));
  }
  error_code ec;
  tcp::resolver resolver(io_);
  auto results = resolver.resolve(host, std::to_string(port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    return Unavailable(where + ": cannot resolve the host: " + (ec ? ec.message() : "no address"));
  }
  const tcp::endpoint ep = results.begin()->endpoint();
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  tcp::endpoint local;
  if (!ec) local = acceptor_.local_endpoint(ec);
  if (ec) return Unavailable(where + ": " + ec.message());
  endpoint_ = FormatHostPort(local.address().to_string(), local.port());
  StartAccept();
  for (int i = 0; i < options_.io_threads; ++i) threads_.emplace_back([this] { RunIo(); });
  return Status::Ok();
}

void TcpTransport::Impl::RunIo() {
  for (;;) {
    try {
      io_.run();
      return;
    } catch (const std::exception& e) {
      // Our handlers do not throw; a throw is a bug, reported rather than ending the process.
      std::fprintf(stderr, "pipecoord transport: an I/O handler threw: %s\n", e.what());
    }
  }
}

void TcpTransport::Impl::Shutdown() {
  {
    std::lock_guard lk(mu_);
    if (shutdown_) return;
    shutdown_ = true;
  }
  cv_.notify_all();
  // Handlers are short (no blocking, no user code), so stopping and joining is prompt; then
  // nothing else touches the sockets and they can be closed from here.
  work_.reset();
  io_.stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  error_code ec;
  acceptor_.close(ec);
  std::set<ConnPtr> conns;
  {
    std::lock_guard lk(mu_);
    conns.swap(conns_);
    parked_.clear();
    for (auto& [rank, p] : peers_) {
      if (p.error.ok()) p.error = Unavailable("the transport was shut down");
      p.queue.clear();
    }
    pending_sends_ = 0;
  }
  for (const auto& c : conns) c->socket.close(ec);  // peers see EOF at once
  cv_.notify_all();
}

bool TcpTransport::Impl::Track(const ConnPtr& conn) {
  std::lock_guard lk(mu_);
  if (shutdown_) return false;
  conns_.insert(conn);
  return true;
}

void TcpTransport::Impl::CloseConn(const ConnPtr& conn, const std::string& why) {
  {
    std::lock_guard lk(mu_);
    if (conn->closed) return;
    conn->closed = true;
    conns_.erase(conn);
    if (conn->peer >= 0) {
      auto it = peers_.find(conn->peer);
      if (it != peers_.end() && it->second.conn == conn && it->second.error.ok()) {
        it->second.error = Unavailable("link to " + PeerName(conn->peer) + " broke: " + why);
        it->second.broke = !shutdown_;
        DropQueue(conn->peer, it->second, why);
      }
    }
  }
  error_code ec;
  conn->socket.close(ec);
  conn->timer.cancel();
  cv_.notify_all();
}

std::vector<int> TcpTransport::Impl::UnconnectedPeers() const {
  std::lock_guard lk(mu_);
  std::vector<int> out;
  for (const auto& [rank, p] : peers_) {
    if (!p.up && !p.broke) out.push_back(rank);
  }
  return out;
}

std::vector<int> TcpTransport::Impl::BrokenPeers() const {
  std::lock_guard lk(mu_);
  std::vector<int> out;
  for (const auto& [rank, p] : peers_) {
    if (p.broke) out.push_back(rank);
  }
  return out;
}

void TcpTransport::Impl::DropQueue(int rank, PeerState& p, const std::string& why) {
  if (p.queue.empty()) return;
  if (send_error_.ok()) {
    send_error_ = Unavailable(std::to_string(p.queue.size()) + " send(s) to " + PeerName(rank) +
                              " were dropped: " + why);
  }
  pending_sends_ -= p.queue.size();
  p.queue.clear();
}

std::string TcpTransport::Impl::PeerName(int rank) const {
  auto it = peers_.find(rank);
  if (it == peers_.end()) return "peer " + std::to_string(rank);
  return "peer " + std::to_string(rank) + " (" + it->second.endpoint + ")";
}

std::string TcpTransport::Impl::KnownPeers() const {
  if (!connect_called_) return "Connect has not been called yet";
  if (peers_.empty()) return "this transport has no peers";
  std::string s = "this transport's peers:";
  for (const auto& [rank, p] : peers_) s += " " + std::to_string(rank);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Accepting side: read the hello, park it until Connect, then accept or refuse.

void TcpTransport::Impl::StartAccept() {
  auto conn = std::make_shared<Conn>(io_);
  acceptor_.async_accept(conn->socket, [this, conn](const error_code& ec) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {  // out of descriptors and the like: try again shortly rather than spin
      accept_retry_.expires_after(milliseconds(50));
      accept_retry_.async_wait([this](const error_code& e) {
        if (!e) StartAccept();
      });
      return;
    }
    asio::post(conn->strand, [this, conn] { OnAccepted(conn); });
    StartAccept();
  });
}

void TcpTransport::Impl::OnAccepted(const ConnPtr& conn) {
  error_code ec;
  conn->socket.set_option(tcp::no_delay(true), ec);
  const tcp::endpoint remote = conn->socket.remote_endpoint(ec);
  conn->remote = ec ? "an unknown address"
                    : FormatHostPort(remote.address().to_string(), remote.port());
  if (!Track(conn)) {
    conn->socket.close(ec);
    return;
  }
  conn->timer.expires_after(options_.handshake_timeout);
  conn->timer.async_wait([this, conn](const error_code& e) {
    if (!e && !conn->handshake_done) CloseConn(conn, "no hello");
  });
  asio::async_read(conn->socket, asio::buffer(conn->in_header),
                   [this, conn](const error_code& e, size_t) { OnHello(conn, e); });
}

void TcpTransport::Impl::OnHello(const ConnPtr& conn, const error_code& ec) {
  if (conn->closed) return;
  if (ec) {
    CloseConn(conn, Describe(ec));
    return;
  }
  conn->handshake_done = true;
  conn->timer.cancel();
  const FrameHeader h = DecodeHeader(conn->in_header);
  if (!ValidateHeader(h, 0).ok() || h.kind != static_cast<uint16_t>(FrameKind::kHello)) {
    CloseConn(conn, "not a hello");  // not one of ours: close without an answer
    return;
  }
  conn->hello = h;
  bool too_many = false;
  {
    std::lock_guard lk(mu_);
    if (!connect_called_) {
      if (parked_.size() < kMaxParked) {
        parked_.push_back(conn);
        return;
      }
      too_many = true;
    }
  }
  if (too_many) {
    CloseConn(conn, "too many connections waiting for Connect");
    return;
  }
  AnswerHello(conn);
}

void TcpTransport::Impl::AnswerHello(const ConnPtr& conn) {
  if (conn->closed) return;
  const FrameHeader& h = conn->hello;
  const int from = h.tag.stage;
  std::optional<RefuseReason> refuse;
  uint64_t session;
  int me;
  {
    std::lock_guard lk(mu_);
    session = session_;
    me = my_rank_;
    auto it = peers_.find(from);
    if (shutdown_) {
      refuse = RefuseReason::kShuttingDown;
    } else if (h.session != session_) {
      refuse = RefuseReason::kSessionMismatch;
    } else if (h.tag.mb != my_rank_) {
      refuse = RefuseReason::kWrongRank;
    } else if (it == peers_.end() || from >= my_rank_) {
      refuse = RefuseReason::kUnexpectedRank;
    } else if (it->second.conn) {
      refuse = RefuseReason::kDuplicateRank;
    } else {
      it->second.conn = conn;
      conn->peer = from;
    }
    if (refuse && it != peers_.end() && !it->second.conn) {
      it->second.last_attempt = "a connection from " + conn->remote + " claiming rank " +
                                std::to_string(from) + " was refused: " +
                                RefuseReasonName(static_cast<uint32_t>(*refuse)) +
                                " (its session " + std::to_string(h.session) + ", ours " +
                                std::to_string(session_) + ")";
    }
  }
  if (refuse) {
    conn->out_control = EncodeHeader(RefuseFrame(session, me, *refuse));
    asio::async_write(conn->socket, asio::buffer(conn->out_control),
                      [this, conn](const error_code&, size_t) { CloseConn(conn, "refused"); });
    return;
  }
  conn->out_control = EncodeHeader(AcceptFrame(session, me, from));
  asio::async_write(conn->socket, asio::buffer(conn->out_control),
                    [this, conn](const error_code& ec, size_t) {
                      if (ec) {
                        CloseConn(conn, "answering the handshake: " + Describe(ec));
                        return;
                      }
                      LinkUp(conn);
                    });
}

// ---------------------------------------------------------------------------------------------
// Dialling side: connect, say hello, read the answer; retry transient failures.

void TcpTransport::Impl::Dial(int peer, const HostPort& hp, Clock::time_point deadline,
                              milliseconds backoff) {
  auto conn = std::make_shared<Conn>(io_);
  conn->remote = FormatHostPort(hp.host, hp.port);
  if (!Track(conn)) return;
  asio::post(conn->strand, [this, conn, peer, hp, deadline, backoff] {
    conn->timer.expires_at(deadline);
    conn->timer.async_wait([this, conn](const error_code& e) {
      if (!e && !conn->handshake_done) CloseConn(conn, "Connect's deadline passed");
    });
    auto resolver = std::make_shared<tcp::resolver>(conn->strand);
    resolver->async_resolve(
        hp.host, std::to_string(hp.port),
        [this, conn, peer, hp, deadline, backoff, resolver](const error_code& ec,
                                                            tcp::resolver::results_type results) {
          if (conn->closed) return;
          if (ec) {
            DialFailed(conn, peer, hp, deadline, backoff,
                       "cannot resolve '" + hp.host + "': " + ec.message());
            return;
          }
          asio::async_connect(
              conn->socket, results,
              [this, conn, peer, hp, deadline, backoff](const error_code& ec2, const tcp::endpoint&) {
                if (conn->closed) return;
                if (ec2) {
                  DialFailed(conn, peer, hp, deadline, backoff, Describe(ec2));
                  return;
                }
                error_code ignored;
                conn->socket.set_option(tcp::no_delay(true), ignored);
                uint64_t session;
                int me;
                {
                  std::lock_guard lk(mu_);
                  session = session_;
                  me = my_rank_;
                }
                conn->out_control = EncodeHeader(HelloFrame(session, me, peer));
                asio::async_write(
                    conn->socket, asio::buffer(conn->out_control),
                    [this, conn, peer, hp, deadline, backoff](const error_code& ec3, size_t) {
                      if (conn->closed) return;
                      if (ec3) {
                        DialFailed(conn, peer, hp, deadline, backoff,
                                   "sending the hello: " + Describe(ec3));
                        return;
                      }
                      asio::async_read(conn->socket, asio::buffer(conn->in_header),
                                       [this, conn, peer, hp, deadline, backoff](
                                           const error_code& ec4, size_t) {
                                         OnDialReply(conn, peer, hp, deadline, backoff, ec4);
                                       });
                    });
              });
        });
  });
}

void TcpTransport::Impl::DialFailed(const ConnPtr& conn, int peer, const HostPort& hp,
                                    Clock::time_point deadline, milliseconds backoff,
                                    const std::string& why) {
  {
    std::lock_guard lk(mu_);
    auto it = peers_.find(peer);
    if (it != peers_.end()) it->second.last_attempt = why;
  }
  CloseConn(conn, why);
  {
    std::lock_guard lk(mu_);
    if (shutdown_ || connect_over_ || !connect_error_.ok()) return;
  }
  if (Clock::now() + backoff >= deadline) return;
  auto timer = std::make_shared<asio::steady_timer>(io_, backoff);
  timer->async_wait([this, timer, peer, hp, deadline, backoff](const error_code& ec) {
    if (!ec) Dial(peer, hp, deadline, std::min(backoff * 2, kMaxBackoff));
  });
}

void TcpTransport::Impl::OnDialReply(const ConnPtr& conn, int peer, const HostPort& hp,
                                     Clock::time_point deadline, milliseconds backoff,
                                     const error_code& ec) {
  if (conn->closed) return;
  if (ec) {  // closed without an answer (shutting down, or not up yet): try again
    DialFailed(conn, peer, hp, deadline, backoff,
               "waiting for the handshake answer: " + Describe(ec));
    return;
  }
  const FrameHeader h = DecodeHeader(conn->in_header);
  uint64_t session;
  int me;
  {
    std::lock_guard lk(mu_);
    session = session_;
    me = my_rank_;
  }
  const std::string who = "rank " + std::to_string(peer) + " at " + conn->remote;
  if (Status st = ValidateHeader(h, 0); !st.ok()) {
    FailConnect(conn, "Connect: " + who + " answered the handshake with a malformed frame: " +
                          st.message());
    return;
  }
  if (h.kind == static_cast<uint16_t>(FrameKind::kRefuse)) {
    // Sessions only grow: a peer on an older session (or shutting one down) is still closing
    // its previous job on the port we dial. It will listen for ours soon: try again.
    const auto reason = static_cast<RefuseReason>(h.tag.channel);
    if ((reason == RefuseReason::kSessionMismatch && h.session < session) ||
        reason == RefuseReason::kShuttingDown) {
      DialFailed(conn, peer, hp, deadline, backoff,
                 who + " was still closing " +
                     (reason == RefuseReason::kShuttingDown ? std::string("a job")
                                                            : "session " + std::to_string(h.session)) +
                     " (its previous job)");
      return;
    }
    std::string detail;
    switch (static_cast<RefuseReason>(h.tag.channel)) {
      case RefuseReason::kSessionMismatch:
        detail = " (it runs session " + std::to_string(h.session) + ", we run session " +
                 std::to_string(session) + ": one side belongs to another job)";
        break;
      case RefuseReason::kWrongRank:
        detail = " (that endpoint belongs to rank " + std::to_string(h.tag.stage) + ")";
        break;
      case RefuseReason::kUnexpectedRank:
        detail = " (rank " + std::to_string(me) + " is not among its peers)";
        break;
      default:
        break;
    }
    FailConnect(conn, "Connect: " + who + " refused the connection: " +
                          RefuseReasonName(h.tag.channel) + detail);
    return;
  }
  if (h.kind != static_cast<uint16_t>(FrameKind::kAccept) || h.session != session ||
      h.tag.stage != peer || h.tag.mb != me) {
    FailConnect(conn, "Connect: " + who + " answered the handshake with kind " +
                          std::to_string(h.kind) + ", session " + std::to_string(h.session) +
                          ", rank " + std::to_string(h.tag.stage) + " (expected an accept from rank " +
                          std::to_string(peer) + " in session " + std::to_string(session) + ")");
    return;
  }
  conn->handshake_done = true;
  conn->timer.cancel();
  bool duplicate = false;
  {
    std::lock_guard lk(mu_);
    auto it = peers_.find(peer);
    if (it == peers_.end() || it->second.conn) {
      duplicate = true;  // cannot happen: each peer is dialled until one attempt succeeds
    } else {
      it->second.conn = conn;
      conn->peer = peer;
    }
  }
  if (duplicate) {
    CloseConn(conn, "duplicate link");
    return;
  }
  LinkUp(conn);
}

void TcpTransport::Impl::FailConnect(const ConnPtr& conn, const std::string& message) {
  {
    std::lock_guard lk(mu_);
    if (connect_error_.ok()) connect_error_ = Unavailable(message);
  }
  CloseConn(conn, message);
}

// ---------------------------------------------------------------------------------------------
// Links: a read loop and a write loop on each connection's strand.

void TcpTransport::Impl::LinkUp(const ConnPtr& conn) {
  bool start_write = false;
  {
    std::lock_guard lk(mu_);
    if (conn->closed) return;
    PeerState& p = peers_.at(conn->peer);
    p.up = true;
    if (!p.queue.empty() && !p.writing) start_write = p.writing = true;
  }
  cv_.notify_all();
  if (start_write) StartWrite(conn);
  ReadHeader(conn);
}

void TcpTransport::Impl::ReadHeader(const ConnPtr& conn) {
  asio::async_read(conn->socket, asio::buffer(conn->in_header),
                   [this, conn](const error_code& ec, size_t) { OnHeader(conn, ec); });
}

void TcpTransport::Impl::OnHeader(const ConnPtr& conn, const error_code& ec) {
  if (ec) {
    CloseConn(conn, Describe(ec));
    return;
  }
  const FrameHeader h = DecodeHeader(conn->in_header);
  // The header is checked before anything is allocated for its payload.
  Status st = ValidateHeader(h, options_.max_payload_bytes);
  if (st.ok() && h.kind != static_cast<uint16_t>(FrameKind::kData)) {
    st = InvalidArgument("a handshake frame (kind " + std::to_string(h.kind) +
                         ") after the handshake");
  }
  if (st.ok() && h.session != session_) {
    st = InvalidArgument("a frame of session " + std::to_string(h.session) + " on a link of session " +
                         std::to_string(session_));
  }
  if (!st.ok()) {
    CloseConn(conn, "malformed frame: " + st.message() + "; link closed");
    return;
  }
  conn->in_tag = h.tag;
  const uint64_t bytes = h.payload_bytes;
  auto payload = kernels::Tensor::Empty(kernels::HostAllocator(),
                                        {kernels::DType::kU8, {static_cast<int64_t>(bytes)}});
  if (!payload.ok()) {
    CloseConn(conn, "cannot allocate " + std::to_string(bytes) + " bytes for a frame's payload");
    return;
  }
  conn->in_payload = std::move(payload).value();
  if (bytes == 0) {
    Deliver(conn, 0);
    ReadHeader(conn);
    return;
  }
  asio::async_read(conn->socket, asio::buffer(conn->in_payload.data(), bytes), LargeSteps,
                   [this, conn, bytes](const error_code& e, size_t) {
                     if (e) {
                       CloseConn(conn, Describe(e) + " (in the middle of a frame)");
                       return;
                     }
                     Deliver(conn, bytes);
                     ReadHeader(conn);
                   });
}

void TcpTransport::Impl::Deliver(const ConnPtr& conn, uint64_t payload_bytes) {
  {
    std::lock_guard lk(mu_);
    inbox_[KeyOf(conn->peer, conn->in_tag)].push_back(std::move(conn->in_payload));
  }
  conn->in_payload = {};
  bytes_received_.fetch_add(kFrameHeaderBytes + payload_bytes, std::memory_order_relaxed);
  cv_.notify_all();
}

void TcpTransport::Impl::StartWrite(const ConnPtr& conn) {
  auto batch = std::make_shared<std::vector<OutFrame>>();
  std::chrono::steady_clock::time_point wait_until{};
  {
    std::lock_guard lk(mu_);
    PeerState& p = peers_.at(conn->peer);
    if (conn->closed || p.queue.empty()) {
      p.writing = false;
      return;
    }
    size_t bytes = 0;
    const auto now = std::chrono::steady_clock::now();
    if (p.queue.front().due > now) wait_until = p.queue.front().due;  // still `writing`: nothing overtakes it
    while (!p.queue.empty() && p.queue.front().due <= now && batch->size() < kMaxBatchFrames &&
           bytes < kMaxBatchBytes) {
      bytes += kFrameHeaderBytes + p.queue.front().payload.bytes();
      batch->push_back(std::move(p.queue.front()));
      p.queue.pop_front();
    }
  }
  if (wait_until != std::chrono::steady_clock::time_point{}) {
    // Runs on the strand; closing the link cancels it, and StartWrite then finds it closed.
    conn->delay_timer.expires_at(wait_until);
    conn->delay_timer.async_wait([this, conn](const error_code&) { StartWrite(conn); });
    return;
  }
  std::vector<asio::const_buffer> buffers;
  buffers.reserve(2 * batch->size());
  for (const OutFrame& f : *batch) {
    buffers.push_back(asio::buffer(f.header));
    if (f.payload.bytes() > 0) buffers.push_back(asio::buffer(f.payload.data(), f.payload.bytes()));
  }
  asio::async_write(conn->socket, buffers, LargeSteps,
                    [this, conn, batch](const error_code& ec, size_t written) {
                      {
                        std::lock_guard lk(mu_);
                        pending_sends_ -= batch->size();
                        if (ec && send_error_.ok()) {
                          send_error_ = Unavailable(std::to_string(batch->size()) +
                                                    " send(s) to " + PeerName(conn->peer) +
                                                    " failed: " + Describe(ec));
                        }
                      }
                      if (!ec) bytes_sent_.fetch_add(written, std::memory_order_relaxed);
                      cv_.notify_all();
                      if (ec) {
                        CloseConn(conn, "sending: " + Describe(ec));
                        return;
                      }
                      StartWrite(conn);
                    });
}

// ---------------------------------------------------------------------------------------------
// The API.

Status TcpTransport::Impl::Connect(int my_rank, const std::map<int, std::string>& peers,
                                   uint64_t session, milliseconds timeout) {
  if (my_rank < 0) {
    return InvalidArgument("Connect: my_rank must be >= 0, got " + std::to_string(my_rank));
  }
  std::map<int, PeerState> table;
  std::vector<std::pair<int, HostPort>> to_dial;
  for (const auto& [rank, text] : peers) {
    if (rank == my_rank) continue;
    if (rank < 0) return InvalidArgument("Connect: peers: rank must be >= 0, got " + std::to_string(rank));
    Result<HostPort> hp = ParseHostPort(text);
    if (!hp.ok()) {
      return InvalidArgument("Connect: peers[" + std::to_string(rank) + "]: " + hp.status().message());
    }
    if (hp->port == 0) {
      return InvalidArgument("Connect: peers[" + std::to_string(rank) + "]: endpoint '" + text +
                             "' has port 0 (pass the port the peer's endpoint() reports)");
    }
    PeerState& p = table[rank];
    p.endpoint = text;
    p.dial = rank > my_rank;
    if (p.dial) {
      to_dial.emplace_back(rank, *hp);
    } else {
      p.last_attempt = "it has not dialled in (the lower rank dials)";
    }
  }
  const Clock::time_point deadline = Clock::now() + timeout;
  std::vector<ConnPtr> parked;
  {
    std::lock_guard lk(mu_);
    if (shutdown_) return Unavailable("Connect: the transport was shut down");
    if (connect_called_) {
      return FailedPrecondition("Connect: already called on this transport (one TcpTransport per job)");
    }
    connect_called_ = true;
    my_rank_ = my_rank;
    session_ = session;
    peers_ = std::move(table);
    parked.swap(parked_);
  }
  for (const ConnPtr& c : parked) asio::post(c->strand, [this, c] { AnswerHello(c); });
  for (const auto& [rank, hp] : to_dial) Dial(rank, hp, deadline, kFirstBackoff);

  std::unique_lock lk(mu_);
  auto all_up = [&] {
    return std::all_of(peers_.begin(), peers_.end(), [](const auto& kv) { return kv.second.up; });
  };
  auto any_broken = [&] {
    return std::any_of(peers_.begin(), peers_.end(),
                       [](const auto& kv) { return !kv.second.error.ok(); });
  };
  const bool done = cv_.wait_until(lk, deadline, [&] {
    return shutdown_ || !connect_error_.ok() || any_broken() || all_up();
  });
  connect_over_ = true;
  if (shutdown_) return Unavailable("Connect: the transport was shut down");
  if (!connect_error_.ok()) return connect_error_;
  for (const auto& [rank, p] : peers_) {
    if (!p.error.ok()) return Unavailable("Connect: " + p.error.message());
  }
  if (done) return Status::Ok();
  std::string missing;
  for (const auto& [rank, p] : peers_) {
    if (p.up) continue;
    if (!missing.empty()) missing += "; ";
    missing += "rank " + std::to_string(rank) + " at " + p.endpoint +
               (p.dial ? " (we dial it; last attempt: " : " (") + p.last_attempt + ")";
  }
  return Unavailable("Connect: rank " + std::to_string(my_rank) + " timed out after " +
                     MsText(timeout) + " waiting for " + missing);
}

Status TcpTransport::Impl::Send(int peer, const MessageTag& tag, kernels::Tensor data) {
  const uint64_t bytes = data.bytes();
  ConnPtr post_to;
  {
    std::lock_guard lk(mu_);
    auto where = [&] { return "Send to " + PeerName(peer) + " tag " + ToString(tag); };
    if (shutdown_) return Unavailable(where() + ": the transport was shut down");
    auto it = peers_.find(peer);
    if (it == peers_.end()) return NotFound(where() + ": unknown peer (" + KnownPeers() + ")");
    if (!data.on_host()) {
      return FailedPrecondition(where() + ": the TCP transport sends host tensors, this " +
                                ToString(data.spec()) + " is on cuda:" + std::to_string(data.device()) +
                                " (stage it through the host)");
    }
    if (bytes > options_.max_payload_bytes) {
      return InvalidArgument(where() + ": payload of " + std::to_string(bytes) +
                             " bytes exceeds max_payload_bytes " +
                             std::to_string(options_.max_payload_bytes));
    }
    PeerState& p = it->second;
    if (!p.error.ok()) return Unavailable(where() + ": " + p.error.message());
    FrameHeader h;
    h.session = session_;
    h.tag = tag;
    h.payload_bytes = bytes;
    const bool delayed = options_.send_delay.count() > 0 && tag.step >= options_.send_delay_from_step;
    p.queue.push_back(OutFrame{EncodeHeader(h), std::move(data),
                               delayed ? std::chrono::steady_clock::now() + options_.send_delay
                                       : std::chrono::steady_clock::time_point{}});
    ++pending_sends_;
    if (p.up && !p.writing) {
      p.writing = true;
      post_to = p.conn;
    }
  }
  if (post_to) asio::post(post_to->strand, [this, post_to] { StartWrite(post_to); });
  return Status::Ok();
}

Result<kernels::Tensor> TcpTransport::Impl::Recv(int peer, const MessageTag& tag,
                                                 milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  const InboxKey key = KeyOf(peer, tag);
  std::unique_lock lk(mu_);
  auto where = [&] { return "Recv from " + PeerName(peer) + " tag " + ToString(tag); };
  if (peers_.find(peer) == peers_.end()) {
    if (shutdown_) return Unavailable(where() + ": the transport was shut down");
    return NotFound(where() + ": unknown peer (" + KnownPeers() + ")");
  }
  for (;;) {
    if (shutdown_) return Unavailable(where() + ": the transport was shut down");
    if (auto it = inbox_.find(key); it != inbox_.end()) {
      kernels::Tensor data = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) inbox_.erase(it);
      return data;
    }
    const PeerState& p = peers_.at(peer);
    if (!p.error.ok()) return Unavailable(where() + ": " + p.error.message());
    if (cv_.wait_until(lk, deadline) == std::cv_status::timeout && Clock::now() >= deadline) {
      if (inbox_.count(key) != 0 || shutdown_ || !p.error.ok()) continue;  // decided above
      size_t others = 0;
      std::string example;
      for (auto it = inbox_.lower_bound(InboxKey{peer, 0, kMinInt, kMinInt, kMinInt});
           it != inbox_.end() && it->first.peer == peer; ++it) {
        others += it->second.size();
        if (example.empty()) {
          example = ToString(MessageTag{it->first.channel, it->first.stage, it->first.mb,
                                        it->first.step});
        }
      }
      std::string detail = p.up ? "" : "; the link is not up (Connect has not finished)";
      if (others > 0) {
        detail += "; " + std::to_string(others) + " message(s) with other tags from this peer " +
                  "are buffered, e.g. " + example;
      }
      return Unavailable(where() + ": timed out after " + MsText(timeout) + detail);
    }
  }
}

Status TcpTransport::Impl::Flush(milliseconds timeout) {
  std::unique_lock lk(mu_);
  const bool done = cv_.wait_for(lk, timeout, [&] { return shutdown_ || pending_sends_ == 0; });
  if (shutdown_) return Unavailable("Flush: the transport was shut down");
  if (!done) {
    std::string peers;
    for (const auto& [rank, p] : peers_) {
      if (!p.queue.empty() || p.writing) peers += (peers.empty() ? "" : ", ") + std::to_string(rank);
    }
    return Unavailable("Flush: " + std::to_string(pending_sends_) + " send(s) still unwritten after " +
                       MsText(timeout) + " (to peers " + peers + ")");
  }
  if (!send_error_.ok()) return Unavailable("Flush: " + send_error_.message());
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// TcpTransport forwards to Impl.

TcpTransport::TcpTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpTransport::~TcpTransport() = default;  // ~Impl shuts down

Result<std::unique_ptr<TcpTransport>> TcpTransport::Listen(const std::string& host, int port,
                                                            const TcpTransportOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  PIPECOORD_RETURN_IF_ERROR(impl->Open(host, port));
  return std::unique_ptr<TcpTransport>(new TcpTransport(std::move(impl)));
}

std::string TcpTransport::endpoint() const { return impl_->endpoint(); }

Status TcpTransport::Connect(int my_rank, const std::map<int, std::string>& peers,
                             uint64_t session, milliseconds timeout) {
  return impl_->Connect(my_rank, peers, session, timeout);
}

Status TcpTransport::Connect(int my_rank, const std::map<int, std::string>& peers,
                             milliseconds timeout) {
  return impl_->Connect(my_rank, peers, impl_->options().session, timeout);
}

Status TcpTransport::Send(int peer, const MessageTag& tag, kernels::Tensor data) {
  // Held here until written, later than Send's return: a counting allocator stops counting it as
  // the sender's own (kernels::Tensor::HandOffToTransport), as the device transports do.
  PIPECOORD_RETURN_IF_ERROR(data.HandOffToTransport());
  return impl_->Send(peer, tag, std::move(data));
}

Result<kernels::Tensor> TcpTransport::Recv(int peer, const MessageTag& tag,
                                           const kernels::TensorSpec& expected, milliseconds timeout) {
  auto bytes = impl_->Recv(peer, tag, timeout);
  if (!bytes.ok()) return bytes.status();
  auto t = bytes->Viewed(expected);
  if (!t.ok()) {
    return Internal("Recv from peer " + std::to_string(peer) + " tag " + ToString(tag) + ": " +
                    t.status().message() + " (the ranks disagree on the tensor)");
  }
  return t;
}

Result<kernels::Tensor> TcpTransport::RecvBytes(int peer, const MessageTag& tag, milliseconds timeout) {
  return impl_->Recv(peer, tag, timeout);
}

Status TcpTransport::Flush(milliseconds timeout) { return impl_->Flush(timeout); }
void TcpTransport::Shutdown() { impl_->Shutdown(); }
std::vector<int> TcpTransport::BrokenPeers() const { return impl_->BrokenPeers(); }
std::vector<int> TcpTransport::UnconnectedPeers() const { return impl_->UnconnectedPeers(); }
uint64_t TcpTransport::bytes_sent() const { return impl_->bytes_sent(); }
uint64_t TcpTransport::bytes_received() const { return impl_->bytes_received(); }

}  // namespace pipecoord::worker
