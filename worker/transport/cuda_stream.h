// RAII for the CUDA resources the GPU transports hold (nccl_transport.h, staged_transport.h):
// the current device for a scope, streams, events, pinned host and plain device memory, and a
// stream-ordered device allocator for tests and tools. Every failure is a Status naming the call
// and the CUDA error (kernels/cuda/cuda_check.h).
#ifndef PIPECOORD_WORKER_TRANSPORT_CUDA_STREAM_H_
#define PIPECOORD_WORKER_TRANSPORT_CUDA_STREAM_H_

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <mutex>

#include "common/status.h"
#include "kernels/tensor.h"

namespace pipecoord::worker::cuda {

// Makes `device` current on the calling thread for the scope's life and then restores the
// device that was current before (a transport runs on the caller's threads, whose current device
// is the caller's business).
class DeviceScope {
 public:
  static Result<DeviceScope> Enter(int device);
  DeviceScope(DeviceScope&& other) noexcept;
  DeviceScope& operator=(DeviceScope&&) = delete;
  DeviceScope(const DeviceScope&) = delete;
  ~DeviceScope();  // restoring cannot be reported; it only fails when the context is gone

 private:
  explicit DeviceScope(int previous) : previous_(previous) {}
  int previous_ = -1;  // -1: nothing to restore
};

// A stream that does not synchronise with the legacy default stream (cudaStreamNonBlocking), so
// a transport's copies and NCCL kernels never wait for unrelated work on stream 0.
class CudaStream {
 public:
  CudaStream() = default;
  static Result<CudaStream> Create(int device);
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream();  // cudaStreamDestroy returns at once; queued work still completes

  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// An event that orders one stream after another or tells the host that work finished. Timing
// is disabled (the cheap kind) unless asked for (benchmarks).
class CudaEvent {
 public:
  CudaEvent() = default;
  static Result<CudaEvent> Create(int device, bool timing = false);
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  ~CudaEvent();

  cudaEvent_t get() const { return event_; }
  // Marks the point after the work queued so far on `stream`.
  Status Record(cudaStream_t stream);
  // Work queued on `stream` from now on starts after the work before the last Record.
  Status MakeStreamWait(cudaStream_t stream) const;
  // Whether the work before the last Record finished (an event never recorded counts as done).
  // The "not ready" answer is cleared from the thread's last error.
  Result<bool> Query() const;
  // Blocks the calling thread until that work finished (for work that depends on no peer).
  Status Synchronize() const;

 private:
  cudaEvent_t event_ = nullptr;
};

// Polls with a growing pause: a few yields first (a transfer that is about to finish), then
// sleeps up to `max_sleep` (a peer that is far behind costs little CPU).
class PollBackoff {
 public:
  explicit PollBackoff(std::chrono::microseconds max_sleep = std::chrono::microseconds(200)) : max_sleep_(max_sleep) {}
  void Pause();
  // Starts over with yields (something just happened: more may follow soon).
  void Reset() {
    rounds_ = 0;
    sleep_ = std::chrono::microseconds(1);
  }

 private:
  int rounds_ = 0;
  std::chrono::microseconds sleep_{1};
  std::chrono::microseconds max_sleep_;
};

// Page-locked host memory (cudaHostAlloc, portable to every device): copies from and to it run
// asynchronously on a stream.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  static Result<PinnedBuffer> Allocate(size_t bytes);
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Plain device memory (cudaMalloc) for a transport's own small buffers. The destructor calls
// cudaFree, which waits for the device: destroy it only once nothing queued can touch it.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  static Result<DeviceMemory> Allocate(int device, size_t bytes);
  DeviceMemory(DeviceMemory&& other) noexcept;
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  // Keeps the memory allocated forever (a transfer that could not be stopped may still write it).
  void Leak() { data_ = nullptr; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  int device_ = -1;
};

// A kernels::Allocator of device memory from cudaMallocAsync / cudaFreeAsync on one stream:
// blocks are stream-ordered on `stream` exactly as the caching pool's blocks are on its default
// stream (reusable by that stream's later work at once), and neither call synchronises the
// device, so tests and tools can allocate and free while NCCL transfers are pending (cudaMalloc
// and cudaFree may wait for them). No caching beyond the driver's own pool.
class StreamOrderedAllocator final : public kernels::Allocator {
 public:
  StreamOrderedAllocator(int device, cudaStream_t stream) : device_(device), stream_(stream) {}

  kernels::MemoryKind kind() const override { return kernels::MemoryKind::kCuda; }
  int device() const override { return device_; }
  Result<void*> Allocate(size_t bytes) override;
  // Errors cannot be reported here; the first is kept and returned by later Allocate calls.
  void Deallocate(void* ptr, size_t bytes) override;

 private:
  const int device_;
  const cudaStream_t stream_;
  std::mutex mu_;
  Status deferred_error_;  // the first failed free
};

}  // namespace pipecoord::worker::cuda

#endif  // PIPECOORD_WORKER_TRANSPORT_CUDA_STREAM_H_
