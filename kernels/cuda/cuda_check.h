// CUDA runtime errors as pipecoord::Status values, for every launcher in kernels/cuda.
//
// A launcher returns the first failure as a Status whose message names the call (or the kernel)
// and the runtime's error name and string, so a report from a GPU nobody can log into still says
// what broke. Out-of-memory is RESOURCE_EXHAUSTED (the caller may retry smaller); every other
// error is INTERNAL. Header-only: nvcc compiles it into each .cu that includes it.
#ifndef PIPECOORD_KERNELS_CUDA_CUDA_CHECK_H_
#define PIPECOORD_KERNELS_CUDA_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <string>

#include "common/status.h"

namespace pipecoord::kernels::cuda {

// OK for cudaSuccess; otherwise "<what>: <cudaErrorName> (<description>)".
inline Status CudaStatus(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return Status::Ok();
  std::string message =
      what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  if (err == cudaErrorMemoryAllocation) return ResourceExhausted(std::move(message));
  return Internal(std::move(message));
}

// The launch error of the kernel just launched (a bad configuration, no kernel image for this
// GPU, ...). Clears the runtime's last error, so the next check reports its own.
inline Status LaunchStatus(const char* kernel) {
  return CudaStatus(cudaGetLastError(), std::string("launch of ") + kernel);
}

// INVALID_ARGUMENT unless 0 <= value <= limit; names the argument and the function.
inline Status CheckSize(const char* function, const char* name, int64_t value,
                        int64_t limit = std::numeric_limits<int32_t>::max()) {
  if (value >= 0 && value <= limit) return Status::Ok();
  return InvalidArgument(std::string(function) + ": " + name + " must be in [0, " +
                         std::to_string(limit) + "], got " + std::to_string(value));
}

// INVALID_ARGUMENT when a buffer the call must read or write is null.
inline Status CheckPointer(const char* function, const char* name, const void* ptr) {
  if (ptr != nullptr) return Status::Ok();
  return InvalidArgument(std::string(function) + ": " + name + " is null");
}

}  // namespace pipecoord::kernels::cuda

// Returns the call's failure as a Status naming the call's source text.
#define PIPECOORD_CUDA_RETURN_IF_ERROR(call) \
  PIPECOORD_RETURN_IF_ERROR(::pipecoord::kernels::cuda::CudaStatus((call), #call))

#endif  // PIPECOORD_KERNELS_CUDA_CUDA_CHECK_H_
