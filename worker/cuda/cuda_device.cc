#include "worker/cuda/cuda_device.h"

#include <utility>

#include "kernels/cuda/cuda_allocator.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/device.h"

namespace pipecoord::worker::cuda {

using kernels::cuda::CudaStatus;

Result<std::unique_ptr<CudaDevice>> CudaDevice::Open(int index) {
  auto devices = kernels::QueryDevices();
  if (!devices.ok()) return devices.status();
  if (index < 0 || index >= static_cast<int>(devices->size())) {
    return InvalidArgument("CUDA device " + std::to_string(index) + " is not present (" +
                           std::to_string(devices->size()) + " visible)");
  }
  std::unique_ptr<CudaDevice> d(new CudaDevice());
  d->index_ = index;
  d->name_ = (*devices)[static_cast<size_t>(index)].name;
  PIPECOORD_RETURN_IF_ERROR(d->MakeCurrent());
  // Non-blocking: no implicit ordering with the legacy default stream other libraries may use.
  PIPECOORD_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&d->stream_, cudaStreamNonBlocking),
                                       "cudaStreamCreateWithFlags(compute stream)"));
  auto allocator = kernels::cuda::NewCudaCachingAllocator(index, d->stream_);
  if (!allocator.ok()) return allocator.status();
  d->allocator_ = std::move(allocator).value();
  kernels::cuda::GemmOptions gemm_options;
  gemm_options.stream = d->stream_;
  auto gemm = kernels::cuda::GemmContext::Create(gemm_options);
  if (!gemm.ok()) return gemm.status();
  d->gemm_ = std::move(gemm).value();
  return d;
}

CudaDevice::~CudaDevice() {
  if (stream_ == nullptr) return;
  // Errors cannot be reported from here; the stream's work must end before its memory goes.
  (void)cudaSetDevice(index_);
  (void)cudaStreamSynchronize(stream_);
  gemm_.reset();
  allocator_.reset();
  (void)cudaStreamDestroy(stream_);
}

Status CudaDevice::MakeCurrent() const {
  return CudaStatus(cudaSetDevice(index_), "cudaSetDevice(" + std::to_string(index_) + ")");
}

Status CudaDevice::Synchronize() const {
  return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(compute stream)");
}

Result<kernels::Tensor> CudaDevice::Empty(const kernels::TensorSpec& spec) {
  return kernels::Tensor::Empty(*allocator_, spec);
}

Result<kernels::Tensor> CudaDevice::Zeros(const kernels::TensorSpec& spec) {
  auto t = Empty(spec);
  if (!t.ok()) return t;
  PIPECOORD_RETURN_IF_ERROR(SetZero(*t));
  return t;
}

Status CudaDevice::SetZero(kernels::Tensor& t) {
  if (t.bytes() == 0) return Status::Ok();
  return CudaStatus(cudaMemsetAsync(t.data(), 0, t.bytes(), stream_),
                    "cudaMemsetAsync(" + kernels::ToString(t.spec()) + ")");
}

Result<kernels::Tensor> CudaDevice::Copy(const kernels::Tensor& src) {
  auto t = Empty(src.spec());
  if (!t.ok()) return t;
  if (src.bytes() > 0) {
    PIPECOORD_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(t->data(), src.data(), src.bytes(), cudaMemcpyDeviceToDevice, stream_),
                   "cudaMemcpyAsync(device to device, " + kernels::ToString(src.spec()) + ")"));
  }
  return t;
}

Status CudaDevice::Upload(const void* host, kernels::Tensor& t) {
  if (t.bytes() == 0) return Status::Ok();
  return CudaStatus(cudaMemcpyAsync(t.data(), host, t.bytes(), cudaMemcpyHostToDevice, stream_),
                    "cudaMemcpyAsync(host to device, " + kernels::ToString(t.spec()) + ")");
}

Status CudaDevice::Download(const kernels::Tensor& t, void* host) {
  if (t.bytes() == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(host, t.data(), t.bytes(), cudaMemcpyDeviceToHost, stream_),
                 "cudaMemcpyAsync(device to host, " + kernels::ToString(t.spec()) + ")"));
  return Synchronize();
}

Result<std::vector<float>> CudaDevice::DownloadFloats(const kernels::Tensor& t) {
  if (t.dtype() != kernels::DType::kF32) {
    return InvalidArgument("DownloadFloats: expected an f32 tensor, got " + kernels::ToString(t.spec()));
  }
  std::vector<float> out(static_cast<size_t>(t.numel()));
  PIPECOORD_RETURN_IF_ERROR(Download(t, out.data()));
  return out;
}

uint64_t CudaDevice::allocated_bytes() const {
  return static_cast<uint64_t>(allocator_->stats().allocated_bytes_current);
}

uint64_t CudaDevice::peak_allocated_bytes() const {
  return static_cast<uint64_t>(allocator_->stats().allocated_bytes_peak);
}

uint64_t CudaDevice::peak_owned_bytes() const {
  return static_cast<uint64_t>(allocator_->stats().owned_bytes_peak);
}

void CudaDevice::ResetPeak() { allocator_->ResetPeakStats(); }

}  // namespace pipecoord::worker::cuda
