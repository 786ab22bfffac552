// DeviceTensorFloats: f32 tensors on one CUDA device seen as one buffer, the CUDA backend's
// gradients as the data-parallel all-reduce reaches them (parallel::FloatBuffer,
// worker/transport/device_allreduce.h). Element k is element k of the concatenation of the
// tensors, in the order given; a chunk may span several tensors.
//
// Everything is queued on the CudaDevice's compute stream, in stream order with the backward
// that wrote the gradients and the optimizer step that reads them: Read copies a range into a
// new tensor from the device's pool (cudaMemcpyAsync device to device), Add adds a received
// chunk in (AddInPlace: own + received in f32, one rounding, the bits of the host ring's
// received + own), Write copies it in, Scale multiplies a range (ScaleInPlace per piece). Nothing
// waits for the GPU. Received chunks must be ready in stream order (the transports make the
// compute stream wait for them before Recv returns).
//
// Not thread-safe (the executor's thread). The tensors are handles sharing the backend's
// storage: the buffer must not outlive the backend.
#ifndef PIPECOORD_WORKER_CUDA_DEVICE_GRADIENTS_H_
#define PIPECOORD_WORKER_CUDA_DEVICE_GRADIENTS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/status.h"
#include "kernels/tensor.h"
#include "worker/cuda/cuda_device.h"
#include "worker/parallel/collectives.h"

namespace pipecoord::worker::cuda {

class DeviceTensorFloats final : public parallel::FloatBuffer {
 public:
  // INVALID_ARGUMENT naming the tensor unless each is f32 on `device` (which must outlive it).
  static Result<std::unique_ptr<DeviceTensorFloats>> Create(CudaDevice* device, std::vector<kernels::Tensor> tensors);

  size_t size() const override { return starts_.back(); }
  Result<kernels::Tensor> Read(size_t begin, size_t count) override;
  Status Add(size_t begin, const kernels::Tensor& chunk) override;
  Status Write(size_t begin, const kernels::Tensor& chunk) override;
  Status Scale(size_t begin, size_t count, float factor) override;

 private:
  DeviceTensorFloats(CudaDevice* device, std::vector<kernels::Tensor> tensors);
  // INVALID_ARGUMENT unless [begin, begin + count) lies inside the buffer.
  Status CheckRange(const char* what, size_t begin, size_t count) const;
  // INVALID_ARGUMENT unless `chunk` is an f32 tensor on this device.
  Status CheckChunk(const char* what, const kernels::Tensor& chunk) const;
  // fn(elements of the tensor, offset into the range, n) for each piece of a tensor inside
  // [begin, begin + count), in order.
  Status ForEachPiece(size_t begin, size_t count, const std::function<Status(float*, size_t, size_t)>& fn);

  CudaDevice* device_;
  std::vector<kernels::Tensor> tensors_;
  std::vector<size_t> starts_;  // tensor i holds elements [starts_[i], starts_[i + 1])
};

}  // namespace pipecoord::worker::cuda

#endif  // PIPECOORD_WORKER_CUDA_DEVICE_GRADIENTS_H_
