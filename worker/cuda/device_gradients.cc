#include "worker/cuda/device_gradients.h"

#include <algorithm>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "worker/cuda/elementwise.h"

namespace pipecoord::worker::cuda {

using kernels::cuda::CudaStatus;

DeviceTensorFloats::DeviceTensorFloats(CudaDevice* device, std::vector<kernels::Tensor> tensors)
    : device_(device), tensors_(std::move(tensors)) {
  starts_.reserve(tensors_.size() + 1);
  size_t at = 0;
  for (const kernels::Tensor& t : tensors_) {
    starts_.push_back(at);
    at += static_cast<size_t>(t.numel());
  }
  starts_.push_back(at);
}

Result<std::unique_ptr<DeviceTensorFloats>> DeviceTensorFloats::Create(CudaDevice* device,
                                                                        std::vector<kernels::Tensor> tensors) {
  if (device == nullptr) return InvalidArgument("DeviceTensorFloats: no device");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const kernels::Tensor& t = tensors[i];
    const bool typed = t.dtype() == kernels::DType::kF32 || t.dtype() == kernels::DType::kBF16;
    if (!typed || t.memory() != kernels::MemoryKind::kCuda || t.device() != device->index()) {
      return InvalidArgument("DeviceTensorFloats: tensor " + std::to_string(i) + " is " + kernels::ToString(t.spec()) +
                             (t.on_host() ? " on the host" : " on cuda:" + std::to_string(t.device())) +
                             ", expected f32 or bf16 on cuda:" + std::to_string(device->index()));
    }
  }
  return std::unique_ptr<DeviceTensorFloats>(new DeviceTensorFloats(device, std::move(tensors)));
}

Status DeviceTensorFloats::CheckRange(const char* what, size_t begin, size_t count) const {
  if (begin <= size() && count <= size() - begin) return Status::Ok();
  return InvalidArgument(std::string("DeviceTensorFloats::") + what + ": elements [" + std::to_string(begin) + ", " +
                         std::to_string(begin + count) + ") are outside the buffer's " + std::to_string(size()));
}

Status DeviceTensorFloats::CheckChunk(const char* what, const kernels::Tensor& chunk) const {
  if (chunk.dtype() == kernels::DType::kF32 && chunk.memory() == kernels::MemoryKind::kCuda &&
      chunk.device() == device_->index()) {
    return Status::Ok();
  }
  return InvalidArgument(std::string("DeviceTensorFloats::") + what + ": the chunk is " +
                         kernels::ToString(chunk.spec()) +
                         (chunk.on_host() ? " on the host" : " on cuda:" + std::to_string(chunk.device())) +
                         ", expected f32 on cuda:" + std::to_string(device_->index()));
}

Status DeviceTensorFloats::ForEachPiece(size_t begin, size_t count, const std::function<Status(const Piece&)>& fn) {
  const size_t end = begin + count;
  // The first tensor whose elements reach past `begin`.
  size_t i = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end() - 1, begin) - starts_.begin());
  i = i == 0 ? 0 : i - 1;
  for (; i < tensors_.size() && starts_[i] < end; ++i) {
    const size_t from = std::max(begin, starts_[i]), to = std::min(end, starts_[i + 1]);
    if (from >= to) continue;  // an empty tensor, or one before the range
    kernels::Tensor& t = tensors_[i];
    const size_t first = from - starts_[i];
    Piece piece{i, nullptr, nullptr, from - begin, to - from};
    if (t.dtype() == kernels::DType::kBF16) {
      piece.bf16 = kernels::cuda::Bf16Offset(static_cast<__nv_bfloat16*>(t.data()), static_cast<int64_t>(first));
    } else {
      piece.f32 = static_cast<float*>(t.data()) + first;
    }
    PIPECOORD_RETURN_IF_ERROR(fn(piece));
  }
  return Status::Ok();
}

Status DeviceTensorFloats::F32Only(const char* what, const Piece& piece) const {
  if (piece.f32 != nullptr) return Status::Ok();
  return FailedPrecondition(std::string("DeviceTensorFloats::") + what + ": tensor " + std::to_string(piece.tensor) +
                            " is bf16, which holds values it is given (all-gathers) but not sums or products "
                            "(an f32 tensor does)");
}

Result<kernels::Tensor> DeviceTensorFloats::Read(size_t begin, size_t count) {
  PIPECOORD_RETURN_IF_ERROR(CheckRange("Read", begin, count));
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  auto out = device_->Empty({kernels::DType::kF32, {static_cast<int64_t>(count)}});
  if (!out.ok()) return out.status();
  float* dst = static_cast<float*>(out->data());
  PIPECOORD_RETURN_IF_ERROR(ForEachPiece(begin, count, [&](const Piece& p) {
    if (p.bf16 != nullptr) return CastToFloat(p.bf16, dst + p.at, static_cast<int64_t>(p.n), device_->stream());
    return CudaStatus(cudaMemcpyAsync(dst + p.at, p.f32, p.n * sizeof(float), cudaMemcpyDeviceToDevice, device_->stream()),
                      "cudaMemcpyAsync(gradient chunk, device to device, " + std::to_string(p.n * sizeof(float)) +
                          " bytes)");
  }));
  return out;
}

Status DeviceTensorFloats::Add(size_t begin, const kernels::Tensor& chunk) {
  PIPECOORD_RETURN_IF_ERROR(CheckChunk("Add", chunk));
  const size_t count = static_cast<size_t>(chunk.numel());
  PIPECOORD_RETURN_IF_ERROR(CheckRange("Add", begin, count));
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  const float* src = static_cast<const float*>(chunk.data());
  return ForEachPiece(begin, count, [&](const Piece& p) {
    PIPECOORD_RETURN_IF_ERROR(F32Only("Add", p));
    return AddInPlace(p.f32, src + p.at, static_cast<int64_t>(p.n), device_->stream());
  });
}

Status DeviceTensorFloats::Write(size_t begin, const kernels::Tensor& chunk) {
  PIPECOORD_RETURN_IF_ERROR(CheckChunk("Write", chunk));
  const size_t count = static_cast<size_t>(chunk.numel());
  PIPECOORD_RETURN_IF_ERROR(CheckRange("Write", begin, count));
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  const float* src = static_cast<const float*>(chunk.data());
  return ForEachPiece(begin, count, [&](const Piece& p) {
    if (p.bf16 != nullptr) return CastToBf16(src + p.at, p.bf16, static_cast<int64_t>(p.n), device_->stream());
    return CudaStatus(cudaMemcpyAsync(p.f32, src + p.at, p.n * sizeof(float), cudaMemcpyDeviceToDevice, device_->stream()),
                      "cudaMemcpyAsync(received gradient chunk, device to device, " +
                          std::to_string(p.n * sizeof(float)) + " bytes)");
  });
}

Status DeviceTensorFloats::Scale(size_t begin, size_t count, float factor) {
  PIPECOORD_RETURN_IF_ERROR(CheckRange("Scale", begin, count));
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  return ForEachPiece(begin, count, [&](const Piece& p) {
    PIPECOORD_RETURN_IF_ERROR(F32Only("Scale", p));
    return ScaleInPlace(p.f32, factor, static_cast<int64_t>(p.n), device_->stream());
  });
}

}  // namespace pipecoord::worker::cuda
