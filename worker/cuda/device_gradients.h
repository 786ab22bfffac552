// DeviceTensorFloats: f32 tensors on one CUDA device seen as one buffer, the CUDA backend's
// gradients as the data-parallel all-reduce reaches them (parallel::FloatBuffer,
// worker/transport/device_allreduce.h). Element k is element k of the concatenation of the
// tensors, in the order given; a chunk may span several tensors.
//
// A tensor is f32 or bf16. A bf16 tensor's elements are its values widened to f32 (exact): Read
// gives them so, Write rounds what it is given to the nearest bf16 (exact for values that came
// from bf16, as an all-gather's do). Add and Scale need f32 tensors (FAILED_PRECONDITION naming
// the bf16 one): the sums of the all-reduce and reduce-scatter round once, in f32. What ZeRO's
// all-gather of the bf16 compute weights runs on, when the fp32 masters are sharded.
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
#include "kernels/cuda/bf16.h"
#include "kernels/tensor.h"
#include "worker/cuda/cuda_device.h"
#include "worker/parallel/collectives.h"

namespace pipecoord::worker::cuda {

class DeviceTensorFloats final : public parallel::FloatBuffer {
 public:
  // INVALID_ARGUMENT naming the tensor unless each is f32 or bf16 on `device` (which must outlive it).
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
  // One tensor's part of a range: its first element (f32 or bf16: the other is null), its offset
  // into the range, its length.
  struct Piece {
    size_t tensor;
    float* f32;
    __nv_bfloat16* bf16;
    size_t at, n;
  };
  // fn(piece) for each piece of a tensor inside [begin, begin + count), in order.
  Status ForEachPiece(size_t begin, size_t count, const std::function<Status(const Piece&)>& fn);
  // FAILED_PRECONDITION unless the piece is f32.
  Status F32Only(const char* what, const Piece& piece) const;

  CudaDevice* device_;
  std::vector<kernels::Tensor> tensors_;
  std::vector<size_t> starts_;  // tensor i holds elements [starts_[i], starts_[i + 1])
};

}  // namespace pipecoord::worker::cuda

#endif  // PIPECOORD_WORKER_CUDA_DEVICE_GRADIENTS_H_
