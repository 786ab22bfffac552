#include "kernels/cuda/cuda_allocator.h"

#include <string>

#include "kernels/device.h"

namespace pipecoord::kernels::cuda {
namespace {

std::string ErrorText(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")";
}

// OK, or "<what>: <cudaErrorName> (<description>)": RESOURCE_EXHAUSTED for out of memory (the
// error is cleared: it is not sticky and must not be blamed on the next call), INTERNAL else.
Status Check(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return Status::Ok();
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return ResourceExhausted(what + ": " + ErrorText(err));
  }
  return Internal(what + ": " + ErrorText(err));
}

// Runs `call` with `device` current, then makes the caller's device current again.
template <typename Call>
Status OnDevice(int device, Call call) {
  int previous = -1;
  PIPECOORD_RETURN_IF_ERROR(Check(cudaGetDevice(&previous), "cudaGetDevice"));
  if (previous != device) {
    PIPECOORD_RETURN_IF_ERROR(Check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")"));
  }
  Status status = call();
  if (previous != device) {
    Status restored = Check(cudaSetDevice(previous), "cudaSetDevice(" + std::to_string(previous) + ") (restoring)");
    if (status.ok()) status = restored;
  }
  return status;
}

cudaEvent_t ToEvent(StreamEvents::Event event) { return reinterpret_cast<cudaEvent_t>(event); }

}  // namespace

Result<void*> CudaMemorySource::Allocate(size_t bytes) {
  void* ptr = nullptr;
  Status status = OnDevice(device_, [&] {
    return Check(cudaMalloc(&ptr, bytes),
                 "cudaMalloc(" + std::to_string(bytes) + " bytes) on device " + std::to_string(device_));
  });
  if (!status.ok()) return status;
  return ptr;
}

Status CudaMemorySource::Free(void* ptr) {
  return OnDevice(device_, [&] { return Check(cudaFree(ptr), "cudaFree on device " + std::to_string(device_)); });
}

CudaStreamEvents::~CudaStreamEvents() {
  for (cudaEvent_t event : spare_) cudaEventDestroy(event);
}

Result<StreamEvents::Event> CudaStreamEvents::Record(StreamId stream) {
  cudaEvent_t event = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!spare_.empty()) {
      event = spare_.back();
      spare_.pop_back();
    }
  }
  Status status = OnDevice(device_, [&] {
    if (event == nullptr) {
      PIPECOORD_RETURN_IF_ERROR(Check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                                      "cudaEventCreateWithFlags on device " + std::to_string(device_)));
    }
    return Check(cudaEventRecord(event, ToCudaStream(stream)),
                 "cudaEventRecord on device " + std::to_string(device_));
  });
  if (!status.ok()) {
    if (event != nullptr) Release(reinterpret_cast<Event>(event));
    return status;
  }
  return reinterpret_cast<Event>(event);
}

Result<bool> CudaStreamEvents::IsComplete(Event event) {
  cudaError_t err = cudaEventQuery(ToEvent(event));
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is an answer, not an error for the next call to find
    return false;
  }
  return Check(err, "cudaEventQuery");
}

Status CudaStreamEvents::Wait(Event event) {
  return Check(cudaEventSynchronize(ToEvent(event)), "cudaEventSynchronize");
}

void CudaStreamEvents::Release(Event event) {
  std::lock_guard<std::mutex> lock(mu_);
  spare_.push_back(ToEvent(event));
}

Result<std::unique_ptr<CachingAllocator>> NewCudaCachingAllocator(int device, cudaStream_t default_stream) {
  auto devices = QueryDevices();
  if (!devices.ok()) return devices.status();
  if (device < 0 || device >= static_cast<int>(devices->size())) {
    return InvalidArgument("caching allocator: device " + std::to_string(device) + " is not present (" +
                           std::to_string(devices->size()) + " visible)");
  }
  const CachingAllocator::Options options{MemoryKind::kCuda, device, ToStreamId(default_stream)};
  return std::make_unique<CachingAllocator>(std::make_unique<CudaMemorySource>(device),
                                            std::make_unique<CudaStreamEvents>(device), options);
}

}  // namespace pipecoord::kernels::cuda
