// The caching allocator on a CUDA device: cudaMalloc / cudaFree as its memory source, CUDA events
// for its cross-stream reuse, and a factory for one device's pool (kernels/caching_allocator.h
// holds the policy).
//
// Streams are identified by their cudaStream_t. Give the pool real streams (cudaStreamCreate) or
// the legacy default stream (nullptr); not cudaStreamPerThread, whose one handle names a
// different stream in each thread, so the pool could not tell them apart.
//
// Destroy the pool before the process exits main: its destructor calls cudaFree, which fails
// once the CUDA runtime is being unloaded (as a static's destructor would run).
#ifndef PIPECOORD_KERNELS_CUDA_CUDA_ALLOCATOR_H_
#define PIPECOORD_KERNELS_CUDA_CUDA_ALLOCATOR_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "kernels/caching_allocator.h"

namespace pipecoord::kernels::cuda {

inline StreamId ToStreamId(cudaStream_t stream) { return reinterpret_cast<StreamId>(stream); }
inline cudaStream_t ToCudaStream(StreamId stream) { return reinterpret_cast<cudaStream_t>(stream); }

// A caching pool on `device` (checked against the visible devices) whose kernels::Allocator
// blocks (Tensor::Empty's) belong to `default_stream`. UNAVAILABLE "no CUDA device: ..." where
// there is no GPU (kernels::QueryDevices' rule); INVALID_ARGUMENT for a device not present.
Result<std::unique_ptr<CachingAllocator>> NewCudaCachingAllocator(int device, cudaStream_t default_stream);

// cudaMalloc / cudaFree with `device` current for the call (the caller's current device is put
// back). cudaErrorMemoryAllocation is RESOURCE_EXHAUSTED, so the pool empties its cache and
// retries; any other error is INTERNAL. Messages name the call, the size and the CUDA error.
class CudaMemorySource final : public RawMemorySource {
 public:
  explicit CudaMemorySource(int device) : device_(device) {}
  Result<void*> Allocate(size_t bytes) override;
  Status Free(void* ptr) override;

 private:
  const int device_;
};

// CUDA events (timing disabled, the cheap kind) on `device`'s streams, kept for reuse after
// Release: a busy pool records one per cross-stream free. Thread-safe.
class CudaStreamEvents final : public StreamEvents {
 public:
  explicit CudaStreamEvents(int device) : device_(device) {}
  ~CudaStreamEvents() override;  // destroys the kept events (errors ignored: nobody to tell)

  Result<Event> Record(StreamId stream) override;       // cudaEventRecord
  Result<bool> IsComplete(Event event) override;        // cudaEventQuery
  Status Wait(Event event) override;                    // cudaEventSynchronize
  void Release(Event event) override;

 private:
  const int device_;
  std::mutex mu_;
  std::vector<cudaEvent_t> spare_;
};

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_CUDA_ALLOCATOR_H_
