// CudaDevice: what every CUDA stage of a process on one GPU shares: the one compute stream all
// their work is queued on, the caching allocator every tensor comes from (blocks belong to that
// stream, so a freed block is reusable at once in stream order), and the cuBLASLt context.
//
// Ownership: every tensor allocated here must be dropped before the CudaDevice is destroyed
// (the pool cannot return a segment with live blocks). The destructor waits for the stream.
//
// Threading: the CUDA current device is per host thread, so each entry point that queues work
// calls MakeCurrent() first. One caller at a time (the executor's thread).
#ifndef PIPECOORD_WORKER_CUDA_CUDA_DEVICE_H_
#define PIPECOORD_WORKER_CUDA_CUDA_DEVICE_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/caching_allocator.h"
#include "kernels/cuda/gemm.h"
#include "kernels/tensor.h"

namespace pipecoord::worker::cuda {

class CudaDevice {
 public:
  // Opens device `index`: UNAVAILABLE "no CUDA device: ..." where there is none to use
  // (kernels::QueryDevices' rule), INVALID_ARGUMENT for an index not present, INTERNAL naming
  // the CUDA call for any other failure.
  static Result<std::unique_ptr<CudaDevice>> Open(int index);
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  int index() const { return index_; }
  const std::string& name() const { return name_; }
  cudaStream_t stream() const { return stream_; }
  kernels::CachingAllocator& allocator() { return *allocator_; }
  kernels::cuda::GemmContext& gemm() { return *gemm_; }

  // cudaSetDevice(index) for the calling thread.
  Status MakeCurrent() const;
  // Waits for everything queued on the stream; a kernel's fault surfaces here.
  Status Synchronize() const;

  // Uninitialised device storage of `spec` from the pool.
  Result<kernels::Tensor> Empty(const kernels::TensorSpec& spec);
  // The same, zero-filled (cudaMemsetAsync on the stream).
  Result<kernels::Tensor> Zeros(const kernels::TensorSpec& spec);
  // A device copy of `src` (same spec), queued on the stream.
  Result<kernels::Tensor> Copy(const kernels::Tensor& src);
  Status SetZero(kernels::Tensor& t);

  // Host -> device: queued on the stream; `host` (t.bytes() bytes, pageable) may be reused as
  // soon as this returns (the runtime stages pageable memory before returning).
  Status Upload(const void* host, kernels::Tensor& t);
  // Device -> host: waits for the stream first, so it sees all work queued before it.
  Status Download(const kernels::Tensor& t, void* host);
  Result<std::vector<float>> DownloadFloats(const kernels::Tensor& t);  // an f32 tensor

  // The pool's allocated bytes (live blocks, rounded) now and at their peak since ResetPeak.
  uint64_t allocated_bytes() const;
  uint64_t peak_allocated_bytes() const;
  // The pool's owned bytes at their peak since ResetPeak: allocated minus the blocks a transport
  // still holds after Send (CachingAllocator::HandOff); the step's memory peak, which the
  // coordinator compares with the plan's budget.
  uint64_t peak_owned_bytes() const;
  void ResetPeak();

 private:
  CudaDevice() = default;

  int index_ = -1;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<kernels::CachingAllocator> allocator_;
  std::unique_ptr<kernels::cuda::GemmContext> gemm_;
};

}  // namespace pipecoord::worker::cuda

#endif  // PIPECOORD_WORKER_CUDA_CUDA_DEVICE_H_
