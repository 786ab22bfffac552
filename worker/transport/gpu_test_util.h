// What the GPU transport tests share: the skip rule of kernels/device_test.cc, a rank's stream
// and poisoning allocator, byte patterns, and copies to and from device tensors on a stream.
#ifndef PIPECOORD_WORKER_TRANSPORT_GPU_TEST_UTIL_H_
#define PIPECOORD_WORKER_TRANSPORT_GPU_TEST_UTIL_H_

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/device.h"
#include "kernels/tensor.h"
#include "worker/transport/cuda_stream.h"

// Fails the test (and returns from the calling function) unless the Status is OK. (Also defined
// by kernels/cuda/gpu_test.h; whichever comes first is used.)
#ifndef PIPECOORD_ASSERT_OK
#define PIPECOORD_ASSERT_OK(expr)                                     \
  do {                                                                \
    const ::pipecoord::Status _status = (expr);                       \
    ASSERT_TRUE(_status.ok()) << #expr << ": " << _status.ToString(); \
  } while (0)
#endif

namespace pipecoord::worker::gpu_testing {

using kernels::cuda::CudaStatus;

// Skips only when QueryDevices answers "no CUDA device: ..." (no GPU, no driver); every other
// CUDA error fails. gpus() is the number of visible devices.
class GpuTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto devices = kernels::QueryDevices();
    if (!devices.ok()) {
      ASSERT_EQ(devices.status().code(), Code::kUnavailable) << devices.status().ToString();
      ASSERT_EQ(devices.status().message().rfind("no CUDA device: ", 0), 0u) << devices.status().ToString();
      GTEST_SKIP() << devices.status().message();
    }
    ASSERT_FALSE(devices->empty());
    gpus_ = static_cast<int>(devices->size());
  }
  int gpus() const { return gpus_; }

 private:
  int gpus_ = 0;
};

// Device memory from cudaMallocAsync on `stream`, every byte set to 0xFF (a NaN in f32 and
// bf16) in stream order before anyone else uses it: a byte a transport leaves unwritten fails
// the exact comparison.
class PoisoningAllocator final : public kernels::Allocator {
 public:
  PoisoningAllocator(int device, cudaStream_t stream) : inner_(device, stream), device_(device), stream_(stream) {}
  kernels::MemoryKind kind() const override { return kernels::MemoryKind::kCuda; }
  int device() const override { return device_; }
  Result<void*> Allocate(size_t bytes) override {
    auto p = inner_.Allocate(bytes);
    if (!p.ok() || bytes == 0) return p;
    auto scope = cuda::DeviceScope::Enter(device_);
    if (!scope.ok()) return scope.status();
    Status st = CudaStatus(cudaMemsetAsync(*p, 0xFF, bytes, stream_), "cudaMemsetAsync (poison)");
    if (!st.ok()) return st;
    return p;
  }
  void Deallocate(void* ptr, size_t bytes) override { inner_.Deallocate(ptr, bytes); }

 private:
  cuda::StreamOrderedAllocator inner_;
  const int device_;
  const cudaStream_t stream_;
};

// What one rank of a test owns: its device's compute stream and allocator.
struct DeviceRank {
  int device = -1;
  cuda::CudaStream stream;
  std::unique_ptr<PoisoningAllocator> allocator;

  static Result<std::unique_ptr<DeviceRank>> Make(int device) {
    auto stream = cuda::CudaStream::Create(device);
    if (!stream.ok()) return stream.status();
    auto r = std::make_unique<DeviceRank>();
    r->device = device;
    r->stream = std::move(*stream);
    r->allocator = std::make_unique<PoisoningAllocator>(device, r->stream.get());
    return r;
  }
  Status Sync() const { return CudaStatus(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize"); }
};

// `bytes` bytes that differ with the seed and the position (a shifted or misplaced range shows).
inline std::vector<uint8_t> Pattern(uint32_t seed, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  uint32_t x = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < bytes; ++i) {
    x = x * 1664525u + 1013904223u;
    out[i] = static_cast<uint8_t>(x >> 24);
  }
  return out;
}

// A device tensor of `spec` on the rank's stream holding `bytes` (synchronised: ready at return).
inline Result<kernels::Tensor> DeviceTensor(DeviceRank& rank, const kernels::TensorSpec& spec,
                                            const std::vector<uint8_t>& bytes) {
  if (bytes.size() != spec.bytes()) return InvalidArgument("DeviceTensor: pattern size differs from the spec");
  auto t = kernels::Tensor::Empty(*rank.allocator, spec);
  if (!t.ok()) return t.status();
  auto scope = cuda::DeviceScope::Enter(rank.device);
  if (!scope.ok()) return scope.status();
  if (!bytes.empty()) {
    PIPECOORD_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(t->data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice, rank.stream.get()),
                   "cudaMemcpyAsync to device"));
  }
  PIPECOORD_RETURN_IF_ERROR(rank.Sync());
  return t;
}

// A device tensor whose bytes are written only after `delay` on the rank's stream (a host
// function sleeps there first; the copy is from pinned memory, so the host does not wait): a
// transport that sends before its producer finished sends the poison.
struct LateTensor {
  kernels::Tensor tensor;
  cuda::PinnedBuffer source;  // read by the queued copy: keep until the stream passed it
};

inline void CUDART_CB SleepOnStream(void* ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(reinterpret_cast<intptr_t>(ms)));
}

inline Result<LateTensor> ProduceLater(DeviceRank& rank, const kernels::TensorSpec& spec,
                                       const std::vector<uint8_t>& bytes, int delay_ms) {
  LateTensor late;
  auto t = kernels::Tensor::Empty(*rank.allocator, spec);
  if (!t.ok()) return t.status();
  late.tensor = std::move(*t);
  auto src = cuda::PinnedBuffer::Allocate(bytes.size());
  if (!src.ok()) return src.status();
  late.source = std::move(*src);
  if (!bytes.empty()) std::memcpy(late.source.data(), bytes.data(), bytes.size());
  auto scope = cuda::DeviceScope::Enter(rank.device);
  if (!scope.ok()) return scope.status();
  PIPECOORD_RETURN_IF_ERROR(CudaStatus(
      cudaLaunchHostFunc(rank.stream.get(), SleepOnStream, reinterpret_cast<void*>(static_cast<intptr_t>(delay_ms))),
      "cudaLaunchHostFunc"));
  if (!bytes.empty()) {
    PIPECOORD_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(late.tensor.data(), late.source.data(), bytes.size(),
                                                         cudaMemcpyHostToDevice, rank.stream.get()),
                                         "cudaMemcpyAsync from pinned memory"));
  }
  return late;
}

// The bytes of a device tensor, read on the rank's stream after everything queued there.
inline Result<std::vector<uint8_t>> ReadBack(DeviceRank& rank, const kernels::Tensor& t) {
  if (t.on_host()) return InvalidArgument("ReadBack: a host tensor");
  std::vector<uint8_t> out(t.bytes());
  auto scope = cuda::DeviceScope::Enter(rank.device);
  if (!scope.ok()) return scope.status();
  if (!out.empty()) {
    PIPECOORD_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(out.data(), t.data(), out.size(), cudaMemcpyDeviceToHost, rank.stream.get()),
                   "cudaMemcpyAsync to host"));
  }
  PIPECOORD_RETURN_IF_ERROR(rank.Sync());
  return out;
}

// Index of the first differing byte, or -1: a failure message that says where.
inline int64_t FirstDifference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return static_cast<int64_t>(std::min(a.size(), b.size()));
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace pipecoord::worker::gpu_testing

#endif  // PIPECOORD_WORKER_TRANSPORT_GPU_TEST_UTIL_H_
