#include "worker/transport/cuda_stream.h"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>

#include "kernels/cuda/cuda_check.h"

namespace pipecoord::worker::cuda {

using kernels::cuda::CudaStatus;

namespace {

std::string OnDevice(const char* call, int device) {
  return std::string(call) + " on device " + std::to_string(device);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

Result<DeviceScope> DeviceScope::Enter(int device) {
  int previous = -1;
  PIPECOORD_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&previous), "cudaGetDevice"));
  if (previous == device) return DeviceScope(-1);
  PIPECOORD_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")"));
  return DeviceScope(previous);
}

DeviceScope::DeviceScope(DeviceScope&& other) noexcept : previous_(std::exchange(other.previous_, -1)) {}

DeviceScope::~DeviceScope() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

// ---------------------------------------------------------------------------------------------

Result<CudaStream> CudaStream::Create(int device) {
  auto scope = DeviceScope::Enter(device);
  if (!scope.ok()) return scope.status();
  CudaStream s;
  PIPECOORD_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking),
                                       OnDevice("cudaStreamCreateWithFlags", device)));
  return s;
}

CudaStream::CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

// ---------------------------------------------------------------------------------------------

Result<CudaEvent> CudaEvent::Create(int device, bool timing) {
  auto scope = DeviceScope::Enter(device);
  if (!scope.ok()) return scope.status();
  CudaEvent e;
  PIPECOORD_RETURN_IF_ERROR(
      CudaStatus(cudaEventCreateWithFlags(&e.event_, timing ? cudaEventDefault : cudaEventDisableTiming),
                 OnDevice("cudaEventCreateWithFlags", device)));
  return e;
}

CudaEvent::CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

Status CudaEvent::Record(cudaStream_t stream) { return CudaStatus(cudaEventRecord(event_, stream), "cudaEventRecord"); }

Status CudaEvent::MakeStreamWait(cudaStream_t stream) const {
  return CudaStatus(cudaStreamWaitEvent(stream, event_, 0), "cudaStreamWaitEvent");
}

Result<bool> CudaEvent::Query() const {
  const cudaError_t err = cudaEventQuery(event_);
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) {
    cudaGetLastError();  // "not ready" is an answer, not an error for the thread's next check
    return false;
  }
  return CudaStatus(err, "cudaEventQuery");
}

Status CudaEvent::Synchronize() const { return CudaStatus(cudaEventSynchronize(event_), "cudaEventSynchronize"); }

// ---------------------------------------------------------------------------------------------

void PollBackoff::Pause() {
  if (++rounds_ <= 64) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(sleep_);
  sleep_ = std::min(max_sleep_, sleep_ * 2);
}

// ---------------------------------------------------------------------------------------------

Result<PinnedBuffer> PinnedBuffer::Allocate(size_t bytes) {
  PinnedBuffer b;
  if (bytes == 0) return b;
  PIPECOORD_RETURN_IF_ERROR(CudaStatus(cudaHostAlloc(&b.data_, bytes, cudaHostAllocPortable),
                                       "cudaHostAlloc(" + std::to_string(bytes) + " bytes)"));
  b.size_ = bytes;
  return b;
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

// ---------------------------------------------------------------------------------------------

Result<DeviceMemory> DeviceMemory::Allocate(int device, size_t bytes) {
  auto scope = DeviceScope::Enter(device);
  if (!scope.ok()) return scope.status();
  DeviceMemory m;
  m.device_ = device;
  if (bytes == 0) return m;
  PIPECOORD_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&m.data_, bytes),
                                       OnDevice(("cudaMalloc(" + std::to_string(bytes) + " bytes)").c_str(), device)));
  m.size_ = bytes;
  return m;
}

DeviceMemory::DeviceMemory(DeviceMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      device_(std::exchange(other.device_, -1)) {}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

DeviceMemory::~DeviceMemory() {
  if (data_ == nullptr) return;
  auto scope = DeviceScope::Enter(device_);
  cudaFree(data_);
}

// ---------------------------------------------------------------------------------------------

Result<void*> StreamOrderedAllocator::Allocate(size_t bytes) {
  {
    std::lock_guard lock(mu_);
    if (!deferred_error_.ok()) return deferred_error_;
  }
  if (bytes == 0) return static_cast<void*>(nullptr);
  auto scope = DeviceScope::Enter(device_);
  if (!scope.ok()) return scope.status();
  void* ptr = nullptr;
  Status st = CudaStatus(cudaMallocAsync(&ptr, bytes, stream_),
                         OnDevice(("cudaMallocAsync(" + std::to_string(bytes) + " bytes)").c_str(), device_));
  if (!st.ok()) {
    if (st.code() == Code::kResourceExhausted) cudaGetLastError();  // out of memory is not sticky
    return st;
  }
  return ptr;
}

void StreamOrderedAllocator::Deallocate(void* ptr, size_t) {
  if (ptr == nullptr) return;
  auto scope = DeviceScope::Enter(device_);
  Status st = scope.ok() ? CudaStatus(cudaFreeAsync(ptr, stream_), OnDevice("cudaFreeAsync", device_)) : scope.status();
  if (!st.ok()) {
    std::lock_guard lock(mu_);
    if (deferred_error_.ok()) deferred_error_ = st;
  }
}

}  // namespace pipecoord::worker::cuda
