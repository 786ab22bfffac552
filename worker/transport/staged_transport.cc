#include "worker/transport/staged_transport.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "worker/transport/cuda_stream.h"

namespace pipecoord::worker {
namespace {

using Clock = std::chrono::steady_clock;
using kernels::cuda::CudaStatus;
using std::chrono::milliseconds;

std::string MsText(milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

// Pinned host memory for staging, kept for reuse: cudaHostAlloc and cudaFreeHost are slow (and
// cudaFreeHost may wait for the device), while a pipeline stages the same few sizes every step.
// Blocks are cached by size (rounded up to 64 KiB) up to kMaxCachedBytes in total. One pool per
// process, never destroyed: pinned tensors handed to the inner transport may outlive any
// StagedTransport.
class PinnedPool final : public kernels::Allocator {
 public:
  static PinnedPool& Get() {
    static PinnedPool* pool = new PinnedPool();
    return *pool;
  }

  kernels::MemoryKind kind() const override { return kernels::MemoryKind::kHost; }

  Result<void*> Allocate(size_t bytes) override {
    if (bytes == 0) return static_cast<void*>(nullptr);
    const size_t size = Rounded(bytes);
    {
      std::lock_guard lock(mu_);
      auto it = cached_.find(size);
      if (it != cached_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_bytes_ -= size;
        return p;
      }
    }
    void* p = nullptr;
    Status st = CudaStatus(cudaHostAlloc(&p, size, cudaHostAllocPortable),
                           "cudaHostAlloc(" + std::to_string(size) + " bytes) for staging");
    if (!st.ok()) {
      if (st.code() == Code::kResourceExhausted) cudaGetLastError();  // not sticky
      return st;
    }
    return p;
  }

  void Deallocate(void* ptr, size_t bytes) override {
    if (ptr == nullptr) return;
    const size_t size = Rounded(bytes);
    {
      std::lock_guard lock(mu_);
      if (cached_bytes_ + size <= kMaxCachedBytes) {
        cached_[size].push_back(ptr);
        cached_bytes_ += size;
        return;
      }
    }
    cudaFreeHost(ptr);  // nobody to tell about a failure; the memory is lost at worst
  }

 private:
  static constexpr size_t kGranule = size_t{64} << 10;
  static constexpr size_t kMaxCachedBytes = size_t{1} << 30;
  static size_t Rounded(size_t bytes) { return (bytes + kGranule - 1) / kGranule * kGranule; }

  std::mutex mu_;
  std::map<size_t, std::vector<void*>> cached_;
  size_t cached_bytes_ = 0;
};

// A send in the staging queue: a device tensor being copied to `host` (copied: the event after
// the copy), or a host tensor passed through behind earlier staged sends to the same peer.
struct Staged {
  int peer = -1;
  MessageTag tag;
  kernels::Tensor host;
  kernels::Tensor device;  // held until the copy completed
  std::shared_ptr<cuda::CudaEvent> copied;
};

// A pinned buffer read by a host-to-device copy, released once `after` completed.
struct PendingRelease {
  kernels::Tensor pinned;
  std::shared_ptr<cuda::CudaEvent> after;
};

// Keeps tensors alive forever: memory a copy that could not be tracked may still touch.
void Leak(kernels::Tensor t) { new kernels::Tensor(std::move(t)); }

}  // namespace

class StagedTransport::Impl {
 public:
  Impl(Transport& inner, const StagedTransportOptions& options)
      : inner_(inner),
        options_(options),
        device_(options.device_allocator != nullptr ? options.device_allocator->device() : -1) {}
  ~Impl();

  Status Send(int peer, const MessageTag& tag, kernels::Tensor data);
  Result<kernels::Tensor> Recv(int peer, const MessageTag& tag, const kernels::TensorSpec& expected,
                               milliseconds timeout);
  Status Flush(milliseconds timeout);
  void Shutdown();
  Transport& inner() const { return inner_; }

 private:
  // Creates the copy stream and starts the staging thread, once. Under mu_.
  Status EnsureCudaLocked();
  void Stager();

  Transport& inner_;
  const StagedTransportOptions options_;
  const int device_;

  std::mutex mu_;
  std::condition_variable cv_;  // queue, releases, shutdown
  bool shutdown_ = false;
  bool cuda_ready_ = false;
  cuda::CudaStream copy_stream_;
  cuda::CudaEvent after_compute_;  // the copy stream waits on it (mu_)
  std::thread stager_;
  std::deque<Staged> queue_;      // in send order
  std::map<int, size_t> queued_;  // queue_ entries by peer
  std::deque<PendingRelease> releases_;
  Status send_error_;  // the first staged send that failed
};

Status StagedTransport::Impl::EnsureCudaLocked() {
  if (cuda_ready_) return Status::Ok();
  auto stream = cuda::CudaStream::Create(device_);
  if (!stream.ok()) return stream.status();
  auto event = cuda::CudaEvent::Create(device_);
  if (!event.ok()) return event.status();
  copy_stream_ = std::move(*stream);
  after_compute_ = std::move(*event);
  stager_ = std::thread([this] { Stager(); });
  cuda_ready_ = true;
  return Status::Ok();
}

Status StagedTransport::Impl::Send(int peer, const MessageTag& tag, kernels::Tensor data) {
  const std::string where = "Send to peer " + std::to_string(peer) + " tag " + ToString(tag);
  if (!data.on_host()) {
    if (options_.device_allocator == nullptr) {
      return FailedPrecondition(where + ": this " + ToString(data.spec()) +
                                " is on cuda:" + std::to_string(data.device()) +
                                ", and this staged transport was built without a device (no device_allocator)");
    }
    if (data.device() != device_) {
      return FailedPrecondition(where + ": the tensor " + ToString(data.spec()) +
                                " is on cuda:" + std::to_string(data.device()) +
                                ", this transport stages cuda:" + std::to_string(device_));
    }
    // Held here until its device-to-host copy ran, later than Send's return: the sender's pool
    // stops counting it as the step's own (kernels::Tensor::HandOffToTransport).
    Status handed = data.HandOffToTransport();
    if (!handed.ok()) return Status(handed.code(), where + ": " + handed.message());
  }
  std::lock_guard lock(mu_);
  if (shutdown_) return Unavailable(where + ": the transport was shut down");
  if (!send_error_.ok()) return Unavailable(where + ": an earlier staged send failed: " + send_error_.message());
  if (data.on_host()) {
    if (queued_[peer] == 0) return inner_.Send(peer, tag, std::move(data));
    queue_.push_back({peer, tag, std::move(data), {}, nullptr});
    ++queued_[peer];
    cv_.notify_all();
    return Status::Ok();
  }
  auto wrap = [&](const Status& s) { return Status(s.code(), where + ": " + s.message()); };
  PIPECOORD_RETURN_IF_ERROR(wrap(EnsureCudaLocked()));
  auto pinned = kernels::Tensor::Empty(PinnedPool::Get(), data.spec());
  if (!pinned.ok()) return wrap(pinned.status());
  std::shared_ptr<cuda::CudaEvent> copied;
  if (data.bytes() > 0) {
    auto scope = cuda::DeviceScope::Enter(device_);
    if (!scope.ok()) return wrap(scope.status());
    // The copy starts after the compute stream's work queued so far: the producer's.
    PIPECOORD_RETURN_IF_ERROR(wrap(after_compute_.Record(options_.compute_stream)));
    PIPECOORD_RETURN_IF_ERROR(wrap(after_compute_.MakeStreamWait(copy_stream_.get())));
    auto event = cuda::CudaEvent::Create(device_);
    if (!event.ok()) return wrap(event.status());
    Status st = CudaStatus(
        cudaMemcpyAsync(pinned->data(), data.data(), data.bytes(), cudaMemcpyDeviceToHost, copy_stream_.get()),
        "cudaMemcpyAsync device to pinned host (" + std::to_string(data.bytes()) + " bytes)");
    if (st.ok()) st = event->Record(copy_stream_.get());
    if (!st.ok()) {
      Leak(std::move(*pinned));  // a copy may have been queued into it
      Leak(std::move(data));
      return wrap(st);
    }
    copied = std::make_shared<cuda::CudaEvent>(std::move(*event));
  }
  queue_.push_back({peer, tag, std::move(*pinned), std::move(data), std::move(copied)});
  ++queued_[peer];
  cv_.notify_all();
  return Status::Ok();
}

void StagedTransport::Impl::Stager() {
  std::unique_lock lock(mu_);
  cuda::PollBackoff backoff;
  for (;;) {
    // Pinned buffers of finished host-to-device copies go back to the pool.
    std::vector<kernels::Tensor> released;
    while (!releases_.empty()) {
      auto done = releases_.front().after->Query();
      if (!done.ok() || !*done) break;  // a failed query keeps the buffer (the destructor waits)
      released.push_back(std::move(releases_.front().pinned));
      releases_.pop_front();
    }
    if (!released.empty()) {
      lock.unlock();
      released.clear();
      lock.lock();
    }
    if (shutdown_) return;  // the destructor waits for what is left
    if (queue_.empty()) {
      if (releases_.empty()) {
        cv_.wait(lock);
      } else {
        cv_.wait_for(lock, std::chrono::milliseconds(1));
      }
      continue;
    }
    Staged& front = queue_.front();
    if (front.copied != nullptr) {
      auto done = front.copied->Query();
      if (!done.ok()) {
        if (send_error_.ok()) {
          send_error_ = Status(done.status().code(), "staging the send of " + ToString(front.tag) + " to peer " +
                                                         std::to_string(front.peer) + ": " + done.status().message());
        }
        // The context is broken: nothing will complete. Keep the memory, drop the send.
        Leak(std::move(front.host));
        Leak(std::move(front.device));
        --queued_[front.peer];
        queue_.pop_front();
        cv_.notify_all();
        continue;
      }
      if (!*done) {
        lock.unlock();
        backoff.Pause();
        lock.lock();
        continue;
      }
    }
    backoff.Reset();
    Status st = inner_.Send(front.peer, front.tag, std::move(front.host));
    if (!st.ok() && send_error_.ok()) send_error_ = st;
    kernels::Tensor device = std::move(front.device);
    --queued_[front.peer];
    queue_.pop_front();
    cv_.notify_all();
    lock.unlock();
    device = kernels::Tensor();  // its copy completed: back to its allocator, outside the lock
    lock.lock();
  }
}

Result<kernels::Tensor> StagedTransport::Impl::Recv(int peer, const MessageTag& tag,
                                                    const kernels::TensorSpec& expected, milliseconds timeout) {
  auto host = inner_.Recv(peer, tag, expected, timeout);
  if (!host.ok() || options_.device_allocator == nullptr) return host;
  const std::string where = "Recv from peer " + std::to_string(peer) + " tag " + ToString(tag);
  auto wrap = [&](const Status& s) { return Status(s.code(), where + ": " + s.message()); };
  {
    std::lock_guard lock(mu_);
    if (shutdown_) return Unavailable(where + ": the transport was shut down");
    PIPECOORD_RETURN_IF_ERROR(wrap(EnsureCudaLocked()));
  }
  auto device = kernels::Tensor::Empty(*options_.device_allocator, expected);
  if (!device.ok()) return wrap(device.status());
  if (expected.bytes() == 0) return device;
  // Pageable memory would make cudaMemcpyAsync wait for the stream; pinned memory does not.
  auto pinned = kernels::Tensor::Empty(PinnedPool::Get(), expected);
  if (!pinned.ok()) return wrap(pinned.status());
  std::memcpy(pinned->data(), host->data(), expected.bytes());
  auto scope = cuda::DeviceScope::Enter(device_);
  if (!scope.ok()) return wrap(scope.status());
  auto event = cuda::CudaEvent::Create(device_);
  if (!event.ok()) return wrap(event.status());
  // On the compute stream: after the block's previous users, before the consumer.
  Status st = CudaStatus(cudaMemcpyAsync(device->data(), pinned->data(), expected.bytes(), cudaMemcpyHostToDevice,
                                         options_.compute_stream),
                         "cudaMemcpyAsync pinned host to device (" + std::to_string(expected.bytes()) + " bytes)");
  if (st.ok()) st = event->Record(options_.compute_stream);
  if (!st.ok()) {
    Leak(std::move(*pinned));
    Leak(std::move(*device));
    return wrap(st);
  }
  std::lock_guard lock(mu_);
  releases_.push_back({std::move(*pinned), std::make_shared<cuda::CudaEvent>(std::move(*event))});
  cv_.notify_all();
  return device;
}

Status StagedTransport::Impl::Flush(milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  Status staged_error;
  {
    std::unique_lock lock(mu_);
    const bool drained = cv_.wait_until(lock, deadline, [&] { return shutdown_ || queue_.empty(); });
    if (shutdown_) return Unavailable("Flush: the transport was shut down");
    if (!drained) {
      return Unavailable("Flush: " + std::to_string(queue_.size()) + " send(s) still being staged after " +
                         MsText(timeout) + " (their device-to-host copies have not finished)");
    }
    staged_error = send_error_;
  }
  const auto left = std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
  Status inner = inner_.Flush(left);
  if (!staged_error.ok()) return Unavailable("Flush: a staged send failed: " + staged_error.message());
  return inner;
}

void StagedTransport::Impl::Shutdown() {
  {
    std::lock_guard lock(mu_);
    if (shutdown_) return;
    shutdown_ = true;
    cv_.notify_all();
  }
  if (stager_.joinable()) stager_.join();
  inner_.Shutdown();
}

StagedTransport::Impl::~Impl() {
  Shutdown();
  // The copies depend on no peer: wait for them, then free what they touched.
  std::lock_guard lock(mu_);
  for (Staged& s : queue_) {
    if (s.copied != nullptr && !s.copied->Synchronize().ok()) {
      Leak(std::move(s.host));
      Leak(std::move(s.device));
    }
  }
  queue_.clear();
  for (PendingRelease& r : releases_) {
    if (!r.after->Synchronize().ok()) Leak(std::move(r.pinned));
  }
  releases_.clear();
}

// ---------------------------------------------------------------------------------------------

StagedTransport::StagedTransport(Transport& inner, const StagedTransportOptions& options)
    : impl_(std::make_unique<Impl>(inner, options)) {}
StagedTransport::~StagedTransport() = default;

Status StagedTransport::Send(int peer, const MessageTag& tag, kernels::Tensor data) {
  return impl_->Send(peer, tag, std::move(data));
}
Result<kernels::Tensor> StagedTransport::Recv(int peer, const MessageTag& tag, const kernels::TensorSpec& expected,
                                              milliseconds timeout) {
  return impl_->Recv(peer, tag, expected, timeout);
}
Status StagedTransport::Flush(milliseconds timeout) { return impl_->Flush(timeout); }
void StagedTransport::Shutdown() { impl_->Shutdown(); }
std::vector<int> StagedTransport::BrokenPeers() const { return impl_->inner().BrokenPeers(); }
uint64_t StagedTransport::bytes_sent() const { return impl_->inner().bytes_sent(); }
uint64_t StagedTransport::bytes_received() const { return impl_->inner().bytes_received(); }

}  // namespace pipecoord::worker
