// Temporary device memory for one launcher call, from CUDA's stream-ordered allocator: taken
// with cudaMallocAsync on the call's stream and given back with cudaFreeAsync on the same
// stream, so it stays valid for every kernel the call queued before the free, without a host
// synchronisation. Host code; header-only.
#ifndef PIPECOORD_KERNELS_CUDA_STREAM_SCRATCH_H_
#define PIPECOORD_KERNELS_CUDA_STREAM_SCRATCH_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "common/status.h"
#include "kernels/cuda/cuda_check.h"

namespace pipecoord::kernels::cuda {

class StreamScratch {
 public:
  explicit StreamScratch(cudaStream_t stream) : stream_(stream) {}
  // Gives the memory back if Free was not called (an early error return).
  ~StreamScratch() {
    if (ptr_ != nullptr) cudaFreeAsync(ptr_, stream_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;

  Status Allocate(size_t bytes) {
    Status status = CudaStatus(cudaMallocAsync(&ptr_, bytes, stream_),
                               "cudaMallocAsync(" + std::to_string(bytes) + " bytes)");
    if (!status.ok()) ptr_ = nullptr;
    return status;
  }

  char* get() const { return static_cast<char*>(ptr_); }

  // Queues the free after everything already on the stream, and reports its result.
  Status Free() {
    void* p = ptr_;
    ptr_ = nullptr;
    if (p == nullptr) return Status::Ok();
    return CudaStatus(cudaFreeAsync(p, stream_), "cudaFreeAsync");
  }

  // Bytes rounded up to 256, so arrays carved one after another stay aligned.
  static size_t Aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

 private:
  cudaStream_t stream_;
  void* ptr_ = nullptr;
};

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_STREAM_SCRATCH_H_
