#include "worker/transport/nccl_transport.h"

#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/device.h"
#include "worker/transport/cuda_stream.h"
#include "worker/transport/nccl_wire.h"

namespace pipecoord::worker {
namespace {

namespace wire = nccl_wire;
using Clock = std::chrono::steady_clock;
using kernels::cuda::CudaStatus;
using std::chrono::milliseconds;

std::string MsText(milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

// Every NCCL call of the process goes through this lock, one at a time: NCCL's thread-safety
// rules forbid issuing to communicators of one device from several threads in parallel.
std::mutex& NcclMutex() {
  static std::mutex* mu = new std::mutex();  // never destroyed: transports may outlive main's locals
  return *mu;
}

template <typename Call>
ncclResult_t Locked(Call call) {
  std::lock_guard lock(NcclMutex());
  return call();
}

// "<what>: <NCCL error string> (<NCCL's last error message>)": UNAVAILABLE for what a peer or
// the system caused (the job can be retried elsewhere), INTERNAL for what is our misuse.
Status NcclStatus(ncclResult_t result, ncclComm_t comm, const std::string& what) {
  std::string message = what + ": " + ncclGetErrorString(result);
  std::string last;
  {
    std::lock_guard lock(NcclMutex());
    if (const char* text = ncclGetLastError(comm); text != nullptr) last = text;
  }
  if (!last.empty()) message += " (" + last + ")";
  const bool external = result == ncclRemoteError || result == ncclSystemError;
  return Status(external ? Code::kUnavailable : Code::kInternal, std::move(message));
}

struct TagKey {
  uint32_t channel;
  int32_t stage;
  int32_t mb;
  int32_t step;
  auto operator<=>(const TagKey&) const = default;
};

TagKey KeyOf(const MessageTag& t) { return {t.channel, t.stage, t.mb, t.step}; }
MessageTag TagOf(const TagKey& k) { return {k.channel, k.stage, k.mb, k.step}; }

// Pinned and device memory for one link's send headers: a header is written on the host, copied
// to the device on the send stream and sent from there (NCCL sends device memory). A slot is
// reused only once its send completed. Grows in chunks; thread-safe.
class HeaderSlots {
 public:
  struct Slot {
    uint8_t* host = nullptr;
    void* device = nullptr;
  };

  Result<Slot> Take(int device) {
    std::lock_guard lock(mu_);
    if (free_.empty()) {
      auto host = cuda::PinnedBuffer::Allocate(kChunk * wire::kHeaderBytes);
      if (!host.ok()) return host.status();
      auto dev = cuda::DeviceMemory::Allocate(device, kChunk * wire::kHeaderBytes);
      if (!dev.ok()) return dev.status();
      for (size_t i = 0; i < kChunk; ++i) {
        free_.push_back({static_cast<uint8_t*>(host->data()) + i * wire::kHeaderBytes,
                         static_cast<uint8_t*>(dev->data()) + i * wire::kHeaderBytes});
      }
      host_chunks_.push_back(std::move(*host));
      device_chunks_.push_back(std::move(*dev));
    }
    Slot s = free_.back();
    free_.pop_back();
    return s;
  }

  void Give(Slot slot) {
    std::lock_guard lock(mu_);
    free_.push_back(slot);
  }

  // The device memory stays allocated (a send that could not be stopped may still read it).
  void LeakDeviceMemory() {
    std::lock_guard lock(mu_);
    for (auto& d : device_chunks_) d.Leak();
    for (auto& h : host_chunks_) new cuda::PinnedBuffer(std::move(h));  // deliberately never freed
    host_chunks_.clear();
  }

 private:
  static constexpr size_t kChunk = 256;
  std::mutex mu_;
  std::vector<Slot> free_;
  std::vector<cuda::PinnedBuffer> host_chunks_;
  std::vector<cuda::DeviceMemory> device_chunks_;
};

// A send issued and not yet known complete: its tensor and header slot are held until then.
struct PendingSend {
  kernels::Tensor tensor;
  HeaderSlots::Slot slot;
  std::shared_ptr<cuda::CudaEvent> done;
  MessageTag tag;
};

// A message taken off the link: its payload's receive is posted (landed: the event after it;
// null for an empty payload) and it waits in the inbox for its Recv.
struct Arrived {
  kernels::Tensor tensor;
  std::shared_ptr<cuda::CudaEvent> landed;
  wire::MessageHeader header;
};

// A payload receive the watchdog watches until it lands.
struct Landing {
  std::shared_ptr<cuda::CudaEvent> landed;
  MessageTag tag;
  Clock::time_point since;
};

// Memory a GPU operation of a broken link may still touch, released once `after` completed.
struct Retiring {
  kernels::Tensor tensor;
  std::shared_ptr<cuda::CudaEvent> after;
};

// One peer: its two communicators and streams, and the state of both directions.
struct Link {
  int rank = -1;                     // the peer's global rank
  int comm_rank = -1;                // this rank's rank in both 2-rank communicators (0: the lower rank)
  int comm_peer = -1;                // the peer's
  std::string send_name, recv_name;  // communicator names (NCCL's logs)

  // Serialises the NCCL and CUDA calls on this link's communicators and streams, and their
  // abort. Held only while issuing, never while waiting for a peer. Lock order: issue_mu, then
  // Impl::mu_.
  std::mutex issue_mu;
  ncclComm_t send_comm = nullptr;  // issue_mu; null once aborted
  ncclComm_t recv_comm = nullptr;
  cuda::CudaStream send_stream;
  cuda::CudaStream recv_stream;
  cuda::CudaEvent send_after_compute;  // issue_mu
  cuda::CudaEvent recv_after_compute;
  HeaderSlots send_headers;
  // The header being received: used by the one Recv that drains this link (Impl::mu_'s draining).
  cuda::PinnedBuffer header_host;
  cuda::DeviceMemory header_device;
  cuda::CudaEvent header_landed;

  // Guarded by Impl::mu_.
  Status error;                // set once the link broke (or the transport shut down); stays
  bool broke = false;          // broke while running (BrokenPeers)
  bool draining = false;       // a Recv is taking messages off the link
  bool header_posted = false;  // a header receive is posted and not yet read
  std::deque<PendingSend> sends;
  std::deque<Landing> landing;
  std::deque<Retiring> retiring;
  std::map<TagKey, std::deque<Arrived>> inbox;
};

// The host's identity as NCCL hashes it: NCCL_HOSTID, else the hostname and the boot id.
std::string HostIdentity() {
  if (const char* id = std::getenv("NCCL_HOSTID"); id != nullptr && id[0] != '\0') return id;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) std::strcpy(name, "unknown");
  std::string boot;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  in >> boot;
  return std::string(name) + boot;
}

}  // namespace

Result<wire::DeviceIdentity> LocalDeviceIdentity(int device) {
  auto devices = kernels::QueryDevices();  // "no CUDA device: ..." where there is none
  if (!devices.ok()) return devices.status();
  wire::DeviceIdentity id;
  id.device = device;
  id.host = HostIdentity();
  cudaDeviceProp prop{};
  PIPECOORD_RETURN_IF_ERROR(
      CudaStatus(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties(" + std::to_string(device) + ")"));
  id.uuid.assign(prop.uuid.bytes, sizeof(prop.uuid.bytes));
  char bus[64] = {};
  PIPECOORD_RETURN_IF_ERROR(CudaStatus(cudaDeviceGetPCIBusId(bus, sizeof(bus) - 1, device),
                                       "cudaDeviceGetPCIBusId(" + std::to_string(device) + ")"));
  id.pci_bus_id = bus;
  return id;
}

// ---------------------------------------------------------------------------------------------

class NcclTransport::Impl {
 public:
  Impl(int device, cudaStream_t compute, kernels::Allocator& allocator, const NcclTransportOptions& options)
      : device_(device), compute_(compute), allocator_(allocator), options_(options) {}
  ~Impl();

  int device() const { return device_; }
  Status Connect(int my_rank, const std::vector<int>& peers, uint64_t session, const RendezvousFn& rendezvous,
                 milliseconds timeout);
  Status Send(int peer, const MessageTag& tag, kernels::Tensor data);
  Result<kernels::Tensor> Recv(int peer, const MessageTag& tag, const kernels::TensorSpec& expected,
                               milliseconds timeout);
  Status Flush(milliseconds timeout);
  void Shutdown();
  std::vector<int> BrokenPeers() const;
  uint64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }
  uint64_t bytes_received() const { return bytes_received_.load(std::memory_order_relaxed); }

 private:
  // Connect's steps.
  Status ExchangeDevices(int my_rank, const std::vector<int>& peers, uint64_t session, const RendezvousFn& rendezvous,
                         Clock::time_point deadline);
  Status ExchangeIds(int my_rank, const std::vector<int>& peers, uint64_t session, const RendezvousFn& rendezvous,
                     Clock::time_point deadline, std::map<int, wire::PairCard>* ids);
  Status BuildLink(Link& link);
  Status InitCommunicators(const std::map<int, wire::PairCard>& ids, Clock::time_point deadline);
  Status Hello(Link& link, bool sending, uint64_t session, Clock::time_point deadline);
  Status WaitEvent(Link& link, const cuda::CudaEvent& event, ncclComm_t comm, Clock::time_point deadline,
                   const std::string& what);

  // NCCL calls: `call` issued under the NCCL lock, then polled until it settles.
  template <typename Call>
  Status Issue(ncclComm_t comm, Clock::time_point deadline, const std::string& what, Call call);
  template <typename Call>
  Status Issue(ncclComm_t comm, const std::string& what, Call call) {
    return Issue(comm, Clock::now() + options_.issue_timeout, what, call);
  }
  Status Settle(ncclComm_t comm, Clock::time_point deadline, const std::string& what);

  // Data path.
  Status IssueSend(Link& link, const wire::MessageHeader& header, const kernels::Tensor& data, PendingSend* pending);
  // Takes the link's next message off and files it: true once one was filed, false when
  // `deadline` passed first (the header receive stays posted). Errors break the link.
  Result<bool> DrainOne(Link& link, Clock::time_point deadline);
  Result<kernels::Tensor> Deliver(Arrived arrived, const kernels::TensorSpec& expected, const std::string& where);

  // Releases what completed; a stalled payload or a failed event query is returned as the
  // reason to break the link. Takes mu_.
  Status Reap(Link& link);
  void Watchdog();
  // Breaks the link (idempotent): records `why`, keeps only fully arrived messages, aborts the
  // communicators and wakes every waiter. BreakLinkLocked needs link.issue_mu held.
  void BreakLink(Link& link, const Status& why);
  void BreakLinkLocked(Link& link, const Status& why);
  Status LinkError(const Link& link) const;  // under mu_

  Link* FindLink(int peer) const;
  std::string PeerName(int peer) const { return "peer " + std::to_string(peer); }

  const int device_;
  const cudaStream_t compute_;
  kernels::Allocator& allocator_;
  const NcclTransportOptions options_;

  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<bool> stopping_{false};  // Shutdown began: pollers give up at once

  mutable std::mutex mu_;
  std::condition_variable cv_;  // inbox, link states, drainers, shutdown
  bool shutdown_ = false;
  bool connect_called_ = false;
  bool connected_ = false;
  int my_rank_ = -1;
  std::map<int, std::unique_ptr<Link>> links_;  // filled by Connect before connected_ is set
  Status send_error_;                           // the first send that failed
  std::vector<kernels::Tensor> graveyard_;      // memory of failed issues, freed only when idle

  std::thread watchdog_;
  std::condition_variable watchdog_cv_;  // with mu_: wakes the watchdog for shutdown
};

// ---------------------------------------------------------------------------------------------
// NCCL calls.

template <typename Call>
Status NcclTransport::Impl::Issue(ncclComm_t comm, Clock::time_point deadline, const std::string& what, Call call) {
  const ncclResult_t r = Locked(call);
  if (r != ncclSuccess && r != ncclInProgress) return NcclStatus(r, comm, what);
  return Settle(comm, deadline, what);
}

Status NcclTransport::Impl::Settle(ncclComm_t comm, Clock::time_point deadline, const std::string& what) {
  cuda::PollBackoff backoff(std::chrono::microseconds(50));
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = Locked([&] { return ncclCommGetAsyncError(comm, &state); });
    if (r != ncclSuccess) return NcclStatus(r, comm, what + ": ncclCommGetAsyncError");
    if (state == ncclSuccess) return Status::Ok();
    if (state != ncclInProgress) return NcclStatus(state, comm, what);
    if (stopping_.load()) return Unavailable(what + ": the transport was shut down");
    if (Clock::now() >= deadline) return Unavailable(what + ": NCCL still busy with it at the deadline");
    backoff.Pause();
  }
}

// ---------------------------------------------------------------------------------------------
// Connect.

Status NcclTransport::Impl::Connect(int my_rank, const std::vector<int>& peers, uint64_t session,
                                    const RendezvousFn& rendezvous, milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  if (my_rank < 0) return InvalidArgument("Connect: my_rank must be >= 0, got " + std::to_string(my_rank));
  std::set<int> seen;
  for (int p : peers) {
    if (p < 0 || p == my_rank || !seen.insert(p).second) {
      return InvalidArgument("Connect: peer " + std::to_string(p) +
                             " is negative, this rank itself, or listed twice (rank " + std::to_string(my_rank) + ")");
    }
  }
  if (!rendezvous) return InvalidArgument("Connect: no rendezvous function");
  if (const char* v = std::getenv("NCCL_LAUNCH_ORDER_IMPLICIT"); v != nullptr && std::atoi(v) != 0) {
    return FailedPrecondition(
        std::string("Connect: NCCL_LAUNCH_ORDER_IMPLICIT=") + v +
        " orders the kernels of different communicators on a GPU by launch; a pending receive would then block "
        "this rank's sends and the crossing schedule deadlocks. Unset it for the NCCL transport");
  }
  {
    std::lock_guard lock(mu_);
    if (shutdown_) return Unavailable("Connect: the transport was shut down");
    if (connect_called_) return FailedPrecondition("Connect: called twice (one Connect per transport)");
    connect_called_ = true;
  }

  // Both ranks of each pair name their GPU; a pair on one GPU is refused before any NCCL
  // resource exists (NCCL would fail or hang on it). Then the lower rank publishes the ids.
  PIPECOORD_RETURN_IF_ERROR(ExchangeDevices(my_rank, peers, session, rendezvous, deadline));
  std::map<int, wire::PairCard> ids;  // by peer: the pair's unique ids
  PIPECOORD_RETURN_IF_ERROR(ExchangeIds(my_rank, peers, session, rendezvous, deadline, &ids));

  {
    std::lock_guard lock(mu_);
    if (shutdown_) return Unavailable("Connect: the transport was shut down");
    my_rank_ = my_rank;
    for (int p : peers) {
      auto link = std::make_unique<Link>();
      link->rank = p;
      link->comm_rank = my_rank < p ? 0 : 1;
      link->comm_peer = 1 - link->comm_rank;
      links_[p] = std::move(link);
    }
  }
  Status st;
  for (auto& [p, link] : links_) {
    st = BuildLink(*link);
    if (!st.ok()) break;
  }
  if (st.ok()) st = InitCommunicators(ids, deadline);
  // One hello each way, pair by pair in (low, high) order and low -> high first: every rank walks
  // its pairs in that global order, so the exchanges cannot wait on each other in a cycle.
  for (auto it = links_.begin(); st.ok() && it != links_.end(); ++it) {
    Link& link = *it->second;
    const bool low = my_rank < link.rank;
    std::lock_guard issue(link.issue_mu);  // Shutdown aborts under it; the waits give up on stopping_
    if (link.send_comm == nullptr || link.recv_comm == nullptr) {
      st = Unavailable("Connect: the transport was shut down");
      break;
    }
    st = Hello(link, /*sending=*/low, session, deadline);
    if (st.ok()) st = Hello(link, /*sending=*/!low, session, deadline);
  }
  if (!st.ok()) {
    for (auto& [p, link] : links_) BreakLink(*link, st);
    std::lock_guard lock(mu_);
    for (auto& [p, link] : links_) link->broke = false;  // never up: not a broken peer
    return st;
  }
  std::lock_guard lock(mu_);
  if (shutdown_) return Unavailable("Connect: the transport was shut down");
  connected_ = true;
  watchdog_ = std::thread([this] { Watchdog(); });
  return Status::Ok();
}

Status NcclTransport::Impl::ExchangeDevices(int my_rank, const std::vector<int>& peers, uint64_t session,
                                            const RendezvousFn& rendezvous, Clock::time_point deadline) {
  auto identity = LocalDeviceIdentity(device_);
  if (!identity.ok()) return identity.status();
  // Publish every card first, then read: no rank waits before it published.
  wire::PairCard card;
  card.device = *identity;
  for (int p : peers) {
    const std::string key = wire::CardKey(session, std::min(my_rank, p), std::max(my_rank, p), my_rank);
    auto published = rendezvous(key, wire::EncodeCard(card));
    if (!published.ok()) {
      return Status(published.status().code(), "Connect: publishing " + key + ": " + published.status().message());
    }
  }
  std::string shared;
  for (int p : peers) {
    const std::string key = wire::CardKey(session, std::min(my_rank, p), std::max(my_rank, p), p);
    auto value = rendezvous(key, "");
    if (!value.ok()) {
      return Status(value.status().code(), "Connect: waiting for " + key + ": " + value.status().message());
    }
    auto theirs_card = wire::DecodeCard(*value);
    if (!theirs_card.ok()) {
      return Status(theirs_card.status().code(), "Connect: " + key + ": " + theirs_card.status().message());
    }
    if (wire::SameDevice(card.device, theirs_card->device)) {
      shared += (shared.empty() ? "" : "; ") + std::string("ranks ") + std::to_string(std::min(my_rank, p)) + " and " +
                std::to_string(std::max(my_rank, p)) + " are both on " + wire::Describe(card.device) + " (rank " +
                std::to_string(p) + " reports " + wire::Describe(theirs_card->device) + ")";
    }
    if (Clock::now() >= deadline) {
      return Unavailable("Connect: timed out exchanging rendezvous cards (last: " + key + ")");
    }
  }
  if (!shared.empty()) {
    return FailedPrecondition("Connect: " + shared +
                              ". NCCL does not support two ranks of one communicator on one GPU (it fails with "
                              "\"Duplicate GPU detected\" or hangs): connect such ranks with the staged transport");
  }
  return Status::Ok();
}

Status NcclTransport::Impl::ExchangeIds(int my_rank, const std::vector<int>& peers, uint64_t session,
                                        const RendezvousFn& rendezvous, Clock::time_point deadline,
                                        std::map<int, wire::PairCard>* ids) {
  for (int p : peers) {
    if (my_rank > p) continue;
    wire::PairCard card;
    for (std::string* out : {&card.low_to_high_id, &card.high_to_low_id}) {
      ncclUniqueId id;
      const ncclResult_t r = Locked([&] { return ncclGetUniqueId(&id); });
      if (r != ncclSuccess) {
        return NcclStatus(r, nullptr, "Connect: ncclGetUniqueId for the pair with rank " + std::to_string(p));
      }
      out->assign(id.internal, sizeof(id.internal));
    }
    const std::string key = wire::IdsKey(session, my_rank, p);
    auto published = rendezvous(key, wire::EncodeCard(card));
    if (!published.ok()) {
      return Status(published.status().code(), "Connect: publishing " + key + ": " + published.status().message());
    }
    (*ids)[p] = std::move(card);
  }
  for (int p : peers) {
    if (my_rank < p) continue;
    const std::string key = wire::IdsKey(session, p, my_rank);
    auto value = rendezvous(key, "");
    if (!value.ok()) {
      return Status(value.status().code(), "Connect: waiting for " + key + ": " + value.status().message());
    }
    auto card = wire::DecodeCard(*value);
    if (!card.ok()) return Status(card.status().code(), "Connect: " + key + ": " + card.status().message());
    if (card->low_to_high_id.size() != sizeof(ncclUniqueId::internal) ||
        card->high_to_low_id.size() != sizeof(ncclUniqueId::internal)) {
      return Internal("Connect: " + key + " lacks the pair's two NCCL unique ids");
    }
    (*ids)[p] = std::move(*card);
    if (Clock::now() >= deadline) {
      return Unavailable("Connect: timed out exchanging the NCCL unique ids (last: " + key + ")");
    }
  }
  return Status::Ok();
}

Status NcclTransport::Impl::BuildLink(Link& link) {
  const std::string where = "Connect: link to " + PeerName(link.rank);
  auto wrap = [&](const Status& s) { return Status(s.code(), where + ": " + s.message()); };
  auto send_stream = cuda::CudaStream::Create(device_);
  if (!send_stream.ok()) return wrap(send_stream.status());
  auto recv_stream = cuda::CudaStream::Create(device_);
  if (!recv_stream.ok()) return wrap(recv_stream.status());
  auto send_after = cuda::CudaEvent::Create(device_);
  if (!send_after.ok()) return wrap(send_after.status());
  auto recv_after = cuda::CudaEvent::Create(device_);
  if (!recv_after.ok()) return wrap(recv_after.status());
  auto header_landed = cuda::CudaEvent::Create(device_);
  if (!header_landed.ok()) return wrap(header_landed.status());
  auto header_host = cuda::PinnedBuffer::Allocate(wire::kHeaderBytes);
  if (!header_host.ok()) return wrap(header_host.status());
  auto header_device = cuda::DeviceMemory::Allocate(device_, wire::kHeaderBytes);
  if (!header_device.ok()) return wrap(header_device.status());
  link.send_stream = std::move(*send_stream);
  link.recv_stream = std::move(*recv_stream);
  link.send_after_compute = std::move(*send_after);
  link.recv_after_compute = std::move(*recv_after);
  link.header_landed = std::move(*header_landed);
  link.header_host = std::move(*header_host);
  link.header_device = std::move(*header_device);
  return Status::Ok();
}

Status NcclTransport::Impl::InitCommunicators(const std::map<int, wire::PairCard>& ids, Clock::time_point deadline) {
  auto scope = cuda::DeviceScope::Enter(device_);  // NCCL binds a communicator to the current device
  if (!scope.ok()) return scope.status();
  for (auto& [p, link_ptr] : links_) {
    Link& link = *link_ptr;
    std::lock_guard issue(link.issue_mu);  // Shutdown aborts under it
    if (stopping_.load()) return Unavailable("Connect: the transport was shut down");
    const bool low = my_rank_ < p;
    const wire::PairCard& low_card = ids.at(p);
    ncclUniqueId low_to_high, high_to_low;
    std::memcpy(low_to_high.internal, low_card.low_to_high_id.data(), sizeof(low_to_high.internal));
    std::memcpy(high_to_low.internal, low_card.high_to_low_id.data(), sizeof(high_to_low.internal));
    link.send_name = "pipecoord " + std::to_string(my_rank_) + "->" + std::to_string(p);
    link.recv_name = "pipecoord " + std::to_string(p) + "->" + std::to_string(my_rank_);
    struct Init {
      ncclComm_t* comm;
      ncclUniqueId id;
      const std::string* name;
    };
    for (const Init& init : {Init{&link.send_comm, low ? low_to_high : high_to_low, &link.send_name},
                             Init{&link.recv_comm, low ? high_to_low : low_to_high, &link.recv_name}}) {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;  // Connect's deadline holds, and an init that hangs can be aborted
      config.commName = init.name->c_str();
      ncclUniqueId id = init.id;
      const ncclResult_t r = Locked([&] { return ncclCommInitRankConfig(init.comm, 2, id, link.comm_rank, &config); });
      if (r != ncclSuccess && r != ncclInProgress) {
        return NcclStatus(r, *init.comm, "Connect: ncclCommInitRankConfig (" + *init.name + ")");
      }
    }
  }
  // Wait for every communicator (they initialise concurrently, in NCCL's threads).
  std::string not_up;
  for (auto& [p, link] : links_) {
    std::lock_guard issue(link->issue_mu);
    for (ncclComm_t comm : {link->send_comm, link->recv_comm}) {
      if (comm == nullptr) return Unavailable("Connect: the transport was shut down");
      Status st = Settle(comm, deadline, "Connect: creating the NCCL communicators with " + PeerName(p));
      if (st.ok()) continue;
      if (Clock::now() < deadline || stopping_.load()) return st;  // an NCCL error, or shutdown
      not_up += (not_up.empty() ? "" : ", ") + std::to_string(p);
      break;
    }
  }
  if (!not_up.empty()) {
    return Unavailable("Connect: timed out creating the NCCL communicators; not up with peers " + not_up +
                       " (did they call Connect for this session?)");
  }
  return Status::Ok();
}

Status NcclTransport::Impl::WaitEvent(Link& link, const cuda::CudaEvent& event, ncclComm_t comm,
                                      Clock::time_point deadline, const std::string& what) {
  cuda::PollBackoff backoff;
  for (;;) {
    auto done = event.Query();
    if (!done.ok()) return Status(done.status().code(), what + ": " + done.status().message());
    if (*done) return Status::Ok();
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = Locked([&] { return ncclCommGetAsyncError(comm, &state); });
    if (r != ncclSuccess) return NcclStatus(r, comm, what + ": ncclCommGetAsyncError");
    if (state != ncclSuccess && state != ncclInProgress) return NcclStatus(state, comm, what);
    if (stopping_.load()) return Unavailable(what + ": the transport was shut down");
    if (Clock::now() >= deadline) return Unavailable(what + ": " + PeerName(link.rank) + " did not answer in time");
    backoff.Pause();
  }
}

Status NcclTransport::Impl::Hello(Link& link, bool sending, uint64_t session, Clock::time_point deadline) {
  auto scope = cuda::DeviceScope::Enter(device_);
  if (!scope.ok()) return scope.status();
  const int32_t session_bits = static_cast<int32_t>(session & 0x7FFFFFFF);
  const MessageTag expected{wire::kHelloChannel, sending ? my_rank_ : link.rank, sending ? link.rank : my_rank_,
                            session_bits};
  const kernels::TensorSpec none{kernels::DType::kU8, {0}};
  if (sending) {
    const std::string what = "Connect: hello to " + PeerName(link.rank);
    auto slot = link.send_headers.Take(device_);
    if (!slot.ok()) return slot.status();
    const wire::HeaderBytes bytes = wire::EncodeHeader(wire::HeaderFor(expected, none));
    std::memcpy(slot->host, bytes.data(), bytes.size());
    PIPECOORD_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(slot->device, slot->host, bytes.size(), cudaMemcpyHostToDevice, link.send_stream.get()),
        what + ": cudaMemcpyAsync of the header"));
    PIPECOORD_RETURN_IF_ERROR(Issue(link.send_comm, deadline, what + ": ncclSend", [&] {
      return ncclSend(slot->device, wire::kHeaderBytes, ncclUint8, link.comm_peer, link.send_comm,
                      link.send_stream.get());
    }));
    auto done = cuda::CudaEvent::Create(device_);
    if (!done.ok()) return done.status();
    PIPECOORD_RETURN_IF_ERROR(done->Record(link.send_stream.get()));
    PIPECOORD_RETURN_IF_ERROR(WaitEvent(link, *done, link.send_comm, deadline, what));
    link.send_headers.Give(*slot);
    bytes_sent_ += wire::kHeaderBytes;
    return Status::Ok();
  }
  const std::string what = "Connect: hello from " + PeerName(link.rank);
  PIPECOORD_RETURN_IF_ERROR(Issue(link.recv_comm, deadline, what + ": ncclRecv", [&] {
    return ncclRecv(link.header_device.data(), wire::kHeaderBytes, ncclUint8, link.comm_peer, link.recv_comm,
                    link.recv_stream.get());
  }));
  PIPECOORD_RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(link.header_host.data(), link.header_device.data(), wire::kHeaderBytes,
                                 cudaMemcpyDeviceToHost, link.recv_stream.get()),
                 what + ": cudaMemcpyAsync of the header"));
  PIPECOORD_RETURN_IF_ERROR(link.header_landed.Record(link.recv_stream.get()));
  PIPECOORD_RETURN_IF_ERROR(WaitEvent(link, link.header_landed, link.recv_comm, deadline, what));
  auto header = wire::DecodeHeader({static_cast<const uint8_t*>(link.header_host.data()), wire::kHeaderBytes});
  if (!header.ok()) return Status(header.status().code(), what + ": " + header.status().message());
  if (!(header->tag == expected) || header->bytes != 0) {
    return Unavailable(what + ": expected the hello " + ToString(expected) + ", got " + ToString(header->tag) +
                       " (the peer belongs to another session, or is another rank)");
  }
  bytes_received_ += wire::kHeaderBytes;
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Send.

Link* NcclTransport::Impl::FindLink(int peer) const {
  auto it = links_.find(peer);
  return it == links_.end() ? nullptr : it->second.get();
}

Status NcclTransport::Impl::LinkError(const Link& link) const {
  return Unavailable("the link to " + PeerName(link.rank) + " is down: " + link.error.message());
}

Status NcclTransport::Impl::Send(int peer, const MessageTag& tag, kernels::Tensor data) {
  const std::string where = "Send to " + PeerName(peer) + " tag " + ToString(tag);
  if (data.on_host()) {
    return FailedPrecondition(where + ": the NCCL transport sends device tensors, this " + ToString(data.spec()) +
                              " is in host memory (use the TCP transport)");
  }
  if (data.device() != device_) {
    return FailedPrecondition(where + ": the tensor " + ToString(data.spec()) +
                              " is on cuda:" + std::to_string(data.device()) +
                              ", this transport runs on cuda:" + std::to_string(device_));
  }
  if (tag.channel == wire::kHelloChannel)
    return InvalidArgument(where + ": channel " + std::to_string(tag.channel) + " is reserved");
  // Held here until the peer took it, later than Send's return: the sender's pool stops counting
  // it as the step's own (kernels::Tensor::HandOffToTransport).
  if (Status handed = data.HandOffToTransport(); !handed.ok()) {
    return Status(handed.code(), where + ": " + handed.message());
  }
  Link* link = nullptr;
  {
    std::lock_guard lock(mu_);
    if (shutdown_) return Unavailable(where + ": the transport was shut down");
    if (!connected_) return FailedPrecondition(where + ": not connected (call Connect first)");
    link = FindLink(peer);
    if (link == nullptr) return NotFound(where + ": unknown peer (not passed to Connect)");
    if (!link->error.ok()) return Status(Code::kUnavailable, where + ": " + LinkError(*link).message());
  }
  const wire::MessageHeader header = wire::HeaderFor(tag, data.spec());
  std::lock_guard issue(link->issue_mu);
  if (link->send_comm == nullptr) {
    std::lock_guard lock(mu_);
    return Unavailable(where + ": " + LinkError(*link).message());
  }
  PendingSend pending;
  Status st = IssueSend(*link, header, data, &pending);
  if (!st.ok()) {
    // What was issued may still read the tensor: it is released only when the link is idle.
    {
      std::lock_guard lock(mu_);
      graveyard_.push_back(std::move(data));
    }
    BreakLinkLocked(*link, st);
    return Status(st.code(), where + ": " + st.message());
  }
  std::lock_guard lock(mu_);
  link->sends.push_back(std::move(pending));
  bytes_sent_ += wire::kHeaderBytes + header.bytes;
  return Status::Ok();
}

Status NcclTransport::Impl::IssueSend(Link& link, const wire::MessageHeader& header, const kernels::Tensor& data,
                                      PendingSend* pending) {
  auto scope = cuda::DeviceScope::Enter(device_);
  if (!scope.ok()) return scope.status();
  auto slot = link.send_headers.Take(device_);
  if (!slot.ok()) return slot.status();
  const wire::HeaderBytes bytes = wire::EncodeHeader(header);
  std::memcpy(slot->host, bytes.data(), bytes.size());
  // The header goes at once (it names the tag and spec, known now), so the receiver's host can
  // post the payload's receive and go on without waiting for this rank's GPU.
  PIPECOORD_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(slot->device, slot->host, bytes.size(), cudaMemcpyHostToDevice, link.send_stream.get()),
      "cudaMemcpyAsync of the header"));
  PIPECOORD_RETURN_IF_ERROR(Issue(link.send_comm, "ncclSend of the header", [&] {
    return ncclSend(slot->device, wire::kHeaderBytes, ncclUint8, link.comm_peer, link.send_comm,
                    link.send_stream.get());
  }));
  // The payload after the compute stream's work queued so far: the producer's.
  PIPECOORD_RETURN_IF_ERROR(link.send_after_compute.Record(compute_));
  PIPECOORD_RETURN_IF_ERROR(link.send_after_compute.MakeStreamWait(link.send_stream.get()));
  if (header.bytes > 0) {
    PIPECOORD_RETURN_IF_ERROR(Issue(link.send_comm, "ncclSend of " + std::to_string(header.bytes) + " bytes", [&] {
      return ncclSend(data.data(), header.bytes, ncclUint8, link.comm_peer, link.send_comm, link.send_stream.get());
    }));
  }
  auto done = cuda::CudaEvent::Create(device_);
  if (!done.ok()) return done.status();
  PIPECOORD_RETURN_IF_ERROR(done->Record(link.send_stream.get()));
  pending->tensor = data;
  pending->slot = *slot;
  pending->done = std::make_shared<cuda::CudaEvent>(std::move(*done));
  pending->tag = header.tag;
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Recv.

Result<kernels::Tensor> NcclTransport::Impl::Recv(int peer, const MessageTag& tag, const kernels::TensorSpec& expected,
                                                  milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  const std::string where = "Recv from " + PeerName(peer) + " tag " + ToString(tag);
  const TagKey key = KeyOf(tag);
  std::unique_lock lock(mu_);
  if (shutdown_) return Unavailable(where + ": the transport was shut down");
  if (!connected_) return FailedPrecondition(where + ": not connected (call Connect first)");
  Link* link = FindLink(peer);
  if (link == nullptr) return NotFound(where + ": unknown peer (not passed to Connect)");
  for (;;) {
    if (shutdown_) return Unavailable(where + ": the transport was shut down");
    if (auto it = link->inbox.find(key); it != link->inbox.end()) {
      Arrived arrived = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) link->inbox.erase(it);
      lock.unlock();
      return Deliver(std::move(arrived), expected, where);
    }
    if (!link->error.ok()) return Unavailable(where + ": " + LinkError(*link).message());
    if (Clock::now() >= deadline) break;
    if (!link->draining) {
      link->draining = true;
      lock.unlock();
      auto filed = DrainOne(*link, deadline);
      lock.lock();
      link->draining = false;
      cv_.notify_all();
      if (!filed.ok()) {
        if (auto it = link->inbox.find(key); it != link->inbox.end()) continue;  // arrived before the break
        return Status(filed.status().code(), where + ": " + filed.status().message());
      }
      continue;
    }
    cv_.wait_until(lock, deadline);
  }
  size_t others = 0;
  std::string example;
  for (const auto& [k, queue] : link->inbox) {
    others += queue.size();
    if (example.empty()) example = ToString(TagOf(k));
  }
  std::string detail = others > 0 ? "; " + std::to_string(others) + " message(s) with other tags from this peer are " +
                                        "buffered, e.g. " + example
                                  : "; nothing else arrived from this peer";
  return Unavailable(where + ": timed out after " + MsText(timeout) + detail);
}

Result<bool> NcclTransport::Impl::DrainOne(Link& link, Clock::time_point deadline) {
  const std::string from = "receiving from " + PeerName(link.rank);
  {
    std::lock_guard issue(link.issue_mu);
    bool posted = false;
    {
      std::lock_guard lock(mu_);
      if (link.recv_comm == nullptr) return LinkError(link);
      posted = link.header_posted;
    }
    if (!posted) {
      Status st = [&]() -> Status {
        auto scope = cuda::DeviceScope::Enter(device_);
        if (!scope.ok()) return scope.status();
        PIPECOORD_RETURN_IF_ERROR(Issue(link.recv_comm, "ncclRecv of a header", [&] {
          return ncclRecv(link.header_device.data(), wire::kHeaderBytes, ncclUint8, link.comm_peer, link.recv_comm,
                          link.recv_stream.get());
        }));
        PIPECOORD_RETURN_IF_ERROR(
            CudaStatus(cudaMemcpyAsync(link.header_host.data(), link.header_device.data(), wire::kHeaderBytes,
                                       cudaMemcpyDeviceToHost, link.recv_stream.get()),
                       "cudaMemcpyAsync of a header"));
        return link.header_landed.Record(link.recv_stream.get());
      }();
      if (!st.ok()) {
        BreakLinkLocked(link, Status(st.code(), from + ": " + st.message()));
        return st;
      }
      std::lock_guard lock(mu_);
      link.header_posted = true;
    }
  }
  // The host waits for the 64-byte header only.
  cuda::PollBackoff backoff;
  for (;;) {
    auto landed = link.header_landed.Query();
    if (!landed.ok()) {
      BreakLink(link, Status(landed.status().code(), from + ": " + landed.status().message()));
      return landed.status();
    }
    if (*landed) break;
    {
      std::lock_guard lock(mu_);
      if (shutdown_) return Unavailable("the transport was shut down");
      if (!link.error.ok()) return LinkError(link);
    }
    if (Clock::now() >= deadline) return false;
    backoff.Pause();
  }
  auto header = wire::DecodeHeader({static_cast<const uint8_t*>(link.header_host.data()), wire::kHeaderBytes});
  if (header.ok() && header->tag.channel == wire::kHelloChannel) {
    header = Internal("a second hello header after Connect (the peer connected again?)");
  }
  if (!header.ok()) {
    BreakLink(link, Status(header.status().code(), from + ": " + header.status().message()));
    return header.status();
  }
  {
    std::lock_guard lock(mu_);
    link.header_posted = false;
  }
  auto tensor = kernels::Tensor::Empty(allocator_, header->spec);
  if (!tensor.ok()) {
    // The payload must be taken off the link before anything behind it: the link is lost.
    Status why(tensor.status().code(), from + ": cannot allocate the " + ToString(header->spec) + " of " +
                                           ToString(header->tag) + ": " + tensor.status().message());
    BreakLink(link, why);
    return why;
  }
  Arrived arrived{std::move(*tensor), nullptr, *header};
  std::unique_lock issue(link.issue_mu);
  if (header->bytes > 0) {
    {
      std::lock_guard lock(mu_);
      if (link.recv_comm == nullptr) return LinkError(link);
    }
    Status st = [&]() -> Status {
      auto scope = cuda::DeviceScope::Enter(device_);
      if (!scope.ok()) return scope.status();
      if (options_.recv_waits_for_compute) {
        PIPECOORD_RETURN_IF_ERROR(link.recv_after_compute.Record(compute_));
        PIPECOORD_RETURN_IF_ERROR(link.recv_after_compute.MakeStreamWait(link.recv_stream.get()));
      }
      PIPECOORD_RETURN_IF_ERROR(Issue(link.recv_comm, "ncclRecv of " + std::to_string(header->bytes) + " bytes", [&] {
        return ncclRecv(arrived.tensor.data(), header->bytes, ncclUint8, link.comm_peer, link.recv_comm,
                        link.recv_stream.get());
      }));
      auto landed = cuda::CudaEvent::Create(device_);
      if (!landed.ok()) return landed.status();
      PIPECOORD_RETURN_IF_ERROR(landed->Record(link.recv_stream.get()));
      arrived.landed = std::make_shared<cuda::CudaEvent>(std::move(*landed));
      return Status::Ok();
    }();
    if (!st.ok()) {
      {
        std::lock_guard lock(mu_);
        graveyard_.push_back(std::move(arrived.tensor));
      }
      Status why(st.code(), from + " the payload of " + ToString(header->tag) + ": " + st.message());
      BreakLinkLocked(link, why);
      return why;
    }
  }
  std::lock_guard lock(mu_);
  if (arrived.landed != nullptr) link.landing.push_back({arrived.landed, header->tag, Clock::now()});
  link.inbox[KeyOf(header->tag)].push_back(std::move(arrived));
  bytes_received_ += wire::kHeaderBytes + header->bytes;
  cv_.notify_all();
  return true;
}

Result<kernels::Tensor> NcclTransport::Impl::Deliver(Arrived arrived, const kernels::TensorSpec& expected,
                                                     const std::string& where) {
  // First the compute stream waits for the payload, whatever happens next: the tensor's memory
  // is stream-ordered on the compute stream and must not be reused before the receive wrote it.
  if (arrived.landed != nullptr) {
    Status st = arrived.landed->MakeStreamWait(compute_);
    if (!st.ok()) {
      std::lock_guard lock(mu_);
      graveyard_.push_back(std::move(arrived.tensor));
      return Status(st.code(), where + ": " + st.message());
    }
  }
  if (arrived.header.bytes != expected.bytes()) {
    return Internal(where + ": expected " + ToString(expected) + " (" + std::to_string(expected.bytes()) +
                    " bytes), the peer sent " + ToString(arrived.header.spec) + " (" +
                    std::to_string(arrived.header.bytes) + " bytes): the ranks disagree on the tensor");
  }
  auto viewed = arrived.tensor.Viewed(expected);
  if (!viewed.ok()) return Internal(where + ": " + viewed.status().message());
  return viewed;
}

// ---------------------------------------------------------------------------------------------
// Completion, failure and shutdown.

Status NcclTransport::Impl::Reap(Link& link) {
  std::vector<kernels::Tensor> released;  // dropped after the lock (a free may take the allocator's lock)
  Status problem;
  {
    std::lock_guard lock(mu_);
    while (!link.sends.empty()) {
      auto done = link.sends.front().done->Query();
      if (!done.ok()) {
        problem = Status(done.status().code(), "a send to " + PeerName(link.rank) + ": " + done.status().message());
        break;
      }
      if (!*done) break;
      link.send_headers.Give(link.sends.front().slot);
      released.push_back(std::move(link.sends.front().tensor));
      link.sends.pop_front();
    }
    while (problem.ok() && !link.landing.empty()) {
      const Landing& l = link.landing.front();
      auto done = l.landed->Query();
      if (!done.ok()) {
        problem = Status(done.status().code(), "the payload of " + ToString(l.tag) + " from " + PeerName(link.rank) +
                                                   ": " + done.status().message());
        break;
      }
      if (*done) {
        link.landing.pop_front();
        continue;
      }
      if (link.error.ok() && Clock::now() - l.since > options_.stall_timeout) {
        problem = Unavailable("the payload of " + ToString(l.tag) + " from " + PeerName(link.rank) +
                              " has not landed " + MsText(options_.stall_timeout) + " after its header");
      }
      break;
    }
    for (auto it = link.retiring.begin(); it != link.retiring.end();) {
      auto done = it->after->Query();
      if (done.ok() && *done) {
        released.push_back(std::move(it->tensor));
        it = link.retiring.erase(it);
      } else {
        ++it;
      }
    }
  }
  return problem;
}

void NcclTransport::Impl::Watchdog() {
  std::unique_lock lock(mu_);
  while (!shutdown_) {
    watchdog_cv_.wait_for(lock, options_.watchdog_period);
    if (shutdown_) break;
    std::vector<Link*> links;
    for (auto& [p, link] : links_) links.push_back(link.get());
    lock.unlock();
    for (Link* link : links) {
      Status problem = Reap(*link);
      if (!problem.ok()) {
        BreakLink(*link, problem);
        continue;
      }
      // Asynchronous NCCL errors (a peer that died, a network failure): skip a link that is busy
      // issuing; the next round looks again.
      std::unique_lock issue(link->issue_mu, std::try_to_lock);
      if (!issue.owns_lock()) continue;
      for (ncclComm_t comm : {link->send_comm, link->recv_comm}) {
        if (comm == nullptr) continue;
        ncclResult_t state = ncclSuccess;
        const ncclResult_t r = Locked([&] { return ncclCommGetAsyncError(comm, &state); });
        if (r != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
          BreakLinkLocked(*link, NcclStatus(r != ncclSuccess ? r : state, comm,
                                            "the link to " + PeerName(link->rank) + " reported an asynchronous error"));
          break;
        }
      }
    }
    lock.lock();
  }
}

void NcclTransport::Impl::BreakLink(Link& link, const Status& why) {
  std::lock_guard issue(link.issue_mu);
  BreakLinkLocked(link, why);
}

void NcclTransport::Impl::BreakLinkLocked(Link& link, const Status& why) {
  {
    std::lock_guard lock(mu_);
    if (link.error.ok()) {
      link.error = why.ok() ? Internal("broken without a reason") : why;
      link.broke = !shutdown_;
      if (!link.sends.empty() && send_error_.ok()) {
        send_error_ = Unavailable("the send of " + ToString(link.sends.front().tag) + " to " + PeerName(link.rank) +
                                  " did not complete: " + link.error.message());
      }
    }
    // Messages whose payload fully landed stay receivable; the others will never be complete.
    // (Checked before the abort below, after which the receive kernels end early.)
    for (auto it = link.inbox.begin(); it != link.inbox.end();) {
      auto& queue = it->second;
      for (auto m = queue.begin(); m != queue.end();) {
        auto landed = m->landed == nullptr ? Result<bool>(true) : m->landed->Query();
        if (landed.ok() && *landed) {
          ++m;
        } else {
          link.retiring.push_back({std::move(m->tensor), m->landed});
          m = queue.erase(m);
        }
      }
      it = queue.empty() ? link.inbox.erase(it) : std::next(it);
    }
    cv_.notify_all();
  }
  for (ncclComm_t* comm : {&link.send_comm, &link.recv_comm}) {
    if (*comm == nullptr) continue;
    // ncclCommAbort makes the communicator's kernels quit and frees it (in NCCL's thread for a
    // nonblocking communicator); the handle is never used again.
    Locked([&] { return ncclCommAbort(*comm); });
    *comm = nullptr;
  }
}

void NcclTransport::Impl::Shutdown() {
  std::vector<Link*> links;
  {
    std::lock_guard lock(mu_);
    if (shutdown_) return;
    shutdown_ = true;
    stopping_ = true;
    for (auto& [p, link] : links_) links.push_back(link.get());
    cv_.notify_all();
    watchdog_cv_.notify_all();
  }
  if (watchdog_.joinable()) watchdog_.join();
  for (Link* link : links) BreakLink(*link, Unavailable("the transport was shut down"));
}

NcclTransport::Impl::~Impl() {
  Shutdown();
  // Free what no stream can touch any more. The communicators are aborted, so every kernel quits
  // soon; a link whose streams stay busy keeps its memory (leaked rather than freed under a
  // transfer).
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(2);
  bool all_idle = true;
  for (auto& [p, link] : links_) {
    bool idle = false;
    cuda::PollBackoff backoff(std::chrono::microseconds(1000));
    for (;;) {
      const cudaError_t s = link->send_stream.get() == nullptr ? cudaSuccess : cudaStreamQuery(link->send_stream.get());
      const cudaError_t r = link->recv_stream.get() == nullptr ? cudaSuccess : cudaStreamQuery(link->recv_stream.get());
      if (s == cudaSuccess && r == cudaSuccess) {
        idle = true;
        break;
      }
      if ((s != cudaSuccess && s != cudaErrorNotReady) || (r != cudaSuccess && r != cudaErrorNotReady)) break;
      if (Clock::now() >= give_up) break;
      backoff.Pause();
    }
    cudaGetLastError();
    if (idle) {
      std::lock_guard lock(mu_);
      link->sends.clear();
      link->retiring.clear();
      link->inbox.clear();
      link->landing.clear();
      continue;
    }
    all_idle = false;
    std::lock_guard lock(mu_);
    auto* leaked = new std::vector<kernels::Tensor>();  // deliberately never freed
    for (auto& s : link->sends) leaked->push_back(std::move(s.tensor));
    for (auto& r : link->retiring) leaked->push_back(std::move(r.tensor));
    for (auto& [k, queue] : link->inbox) {
      for (auto& m : queue) leaked->push_back(std::move(m.tensor));
    }
    link->send_headers.LeakDeviceMemory();
    link->header_device.Leak();
  }
  std::lock_guard lock(mu_);
  if (all_idle) {
    graveyard_.clear();
  } else {
    new std::vector<kernels::Tensor>(std::move(graveyard_));  // deliberately never freed
  }
}

// ---------------------------------------------------------------------------------------------
// Flush and the rest.

Status NcclTransport::Impl::Flush(milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  cuda::PollBackoff backoff;
  for (;;) {
    std::vector<Link*> links;
    {
      std::lock_guard lock(mu_);
      if (shutdown_) return Unavailable("Flush: the transport was shut down");
      for (auto& [p, link] : links_) links.push_back(link.get());
    }
    for (Link* link : links) {
      Status problem = Reap(*link);
      if (!problem.ok()) BreakLink(*link, problem);
    }
    std::lock_guard lock(mu_);
    if (shutdown_) return Unavailable("Flush: the transport was shut down");
    size_t pending = 0;
    std::string peers;
    for (auto& [p, link] : links_) {
      if (!link->error.ok() || link->sends.empty()) continue;
      pending += link->sends.size();
      peers += (peers.empty() ? "" : ", ") + std::to_string(p);
    }
    if (pending == 0) {
      if (!send_error_.ok()) return Unavailable("Flush: " + send_error_.message());
      return Status::Ok();
    }
    if (Clock::now() >= deadline) {
      return Unavailable("Flush: " + std::to_string(pending) + " send(s) not received after " + MsText(timeout) +
                         " (to peers " + peers + "; an NCCL send completes once the peer's Recv took it off the link)");
    }
    backoff.Pause();
  }
}

std::vector<int> NcclTransport::Impl::BrokenPeers() const {
  std::lock_guard lock(mu_);
  std::vector<int> out;
  for (const auto& [p, link] : links_) {
    if (link->broke) out.push_back(p);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

Result<std::unique_ptr<NcclTransport>> NcclTransport::Create(int device, cudaStream_t compute_stream,
                                                             kernels::Allocator& allocator,
                                                             const NcclTransportOptions& options) {
  auto devices = kernels::QueryDevices();
  if (!devices.ok()) return devices.status();
  if (device < 0 || device >= static_cast<int>(devices->size())) {
    return InvalidArgument("NcclTransport: device " + std::to_string(device) + " is not present (" +
                           std::to_string(devices->size()) + " visible)");
  }
  if (allocator.kind() != kernels::MemoryKind::kCuda || allocator.device() != device) {
    return InvalidArgument("NcclTransport: the allocator gives " +
                           std::string(allocator.kind() == kernels::MemoryKind::kCuda
                                           ? "cuda:" + std::to_string(allocator.device())
                                           : std::string("host")) +
                           " memory, the transport runs on cuda:" + std::to_string(device));
  }
  if (options.stall_timeout.count() <= 0 || options.issue_timeout.count() <= 0 ||
      options.watchdog_period.count() <= 0) {
    return InvalidArgument("NcclTransport: stall_timeout, issue_timeout and watchdog_period must be positive");
  }
  return std::unique_ptr<NcclTransport>(
      new NcclTransport(std::make_unique<Impl>(device, compute_stream, allocator, options)));
}

NcclTransport::NcclTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NcclTransport::~NcclTransport() = default;

Status NcclTransport::Connect(int my_rank, const std::vector<int>& peers, uint64_t session,
                              const RendezvousFn& rendezvous, milliseconds timeout) {
  return impl_->Connect(my_rank, peers, session, rendezvous, timeout);
}
Status NcclTransport::Send(int peer, const MessageTag& tag, kernels::Tensor data) {
  return impl_->Send(peer, tag, std::move(data));
}
Result<kernels::Tensor> NcclTransport::Recv(int peer, const MessageTag& tag, const kernels::TensorSpec& expected,
                                            milliseconds timeout) {
  return impl_->Recv(peer, tag, expected, timeout);
}
Status NcclTransport::Flush(milliseconds timeout) { return impl_->Flush(timeout); }
void NcclTransport::Shutdown() { impl_->Shutdown(); }
std::vector<int> NcclTransport::BrokenPeers() const { return impl_->BrokenPeers(); }
uint64_t NcclTransport::bytes_sent() const { return impl_->bytes_sent(); }
uint64_t NcclTransport::bytes_received() const { return impl_->bytes_received(); }
int NcclTransport::device() const { return impl_->device(); }

}  // namespace pipecoord::worker
