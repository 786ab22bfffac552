// What every kernels/cuda test shares: the skip rule, a stream, device buffers, bf16 on the host.
//
// Skip rule (as kernels/device_test.cc): a test skips only when kernels::QueryDevices() answers
// UNAVAILABLE "no CUDA device: ..." (no GPU, or no driver at all); any other CUDA error fails.
#ifndef PIPECOORD_KERNELS_CUDA_GPU_TEST_H_
#define PIPECOORD_KERNELS_CUDA_GPU_TEST_H_

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "common/status.h"
#include "kernels/cpu/rng.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/compare.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/device.h"

// Fails the test (and returns from the calling function) unless the Status is OK.
#define PIPECOORD_ASSERT_OK(expr)                          \
  do {                                                     \
    const ::pipecoord::Status _status = (expr);            \
    ASSERT_TRUE(_status.ok()) << #expr << ": " << _status.ToString(); \
  } while (0)

namespace pipecoord::kernels::cuda {

// A fixture on device 0 with its own stream; skips by the rule above.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto devices = QueryDevices();
    if (!devices.ok()) {
      ASSERT_EQ(devices.status().code(), Code::kUnavailable) << devices.status().ToString();
      ASSERT_EQ(devices.status().message().rfind("no CUDA device: ", 0), 0u)
          << devices.status().ToString();
      GTEST_SKIP() << devices.status().message();
    }
    ASSERT_FALSE(devices->empty());
    PIPECOORD_ASSERT_OK(CudaStatus(cudaSetDevice(0), "cudaSetDevice(0)"));
    PIPECOORD_ASSERT_OK(CudaStatus(cudaStreamCreate(&stream_), "cudaStreamCreate"));
  }

  void TearDown() override {
    if (stream_ != nullptr) {
      EXPECT_TRUE(CudaStatus(cudaStreamDestroy(stream_), "cudaStreamDestroy").ok());
      stream_ = nullptr;
    }
  }

  // Waits for the stream's work; its error (a kernel fault) is the test's failure.
  Status Sync() { return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

  cudaStream_t stream_ = nullptr;
};

// How a test holds an element of T on the host: float as is, bf16 as its raw bits.
template <typename T>
struct HostStorage {
  using type = T;
};
template <>
struct HostStorage<__nv_bfloat16> {
  using type = uint16_t;
};
template <typename T>
using HostStorageT = typename HostStorage<T>::type;

// count elements of T in device memory, freed on destruction. A failed allocation leaves
// get() null and status() saying why.
template <typename T>
class DeviceBuffer {
 public:
  using Host = HostStorageT<T>;

  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count == 0) return;
    status_ = CudaStatus(cudaMalloc(&ptr_, count * sizeof(Host)),
                         "cudaMalloc(" + std::to_string(count * sizeof(Host)) + " bytes)");
    if (!status_.ok()) ptr_ = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  const Status& status() const { return status_; }
  T* get() { return static_cast<T*>(ptr_); }
  size_t size() const { return count_; }

  Status Upload(const std::vector<Host>& host) {
    if (host.size() != count_) {
      return InvalidArgument("Upload: " + std::to_string(host.size()) + " values for a buffer of " +
                             std::to_string(count_));
    }
    if (count_ == 0) return Status::Ok();
    return CudaStatus(
        cudaMemcpy(ptr_, host.data(), count_ * sizeof(Host), cudaMemcpyHostToDevice),
        "cudaMemcpy to device");
  }

  // Every byte 0xFF: a NaN in float, bf16 and double, so an element a kernel leaves unwritten
  // fails the comparison.
  Status Poison() {
    if (count_ == 0) return Status::Ok();
    return CudaStatus(cudaMemset(ptr_, 0xFF, count_ * sizeof(Host)), "cudaMemset (poison)");
  }

  Status Download(std::vector<Host>* host) const {
    host->resize(count_);
    if (count_ == 0) return Status::Ok();
    return CudaStatus(
        cudaMemcpy(host->data(), ptr_, count_ * sizeof(Host), cudaMemcpyDeviceToHost),
        "cudaMemcpy to host");
  }

 private:
  size_t count_ = 0;
  void* ptr_ = nullptr;
  Status status_;
};

// Uniform values in [lo, hi) from the CPU twins' RNG, so a failing case can be replayed.
inline std::vector<float> RandomFloats(uint64_t seed, int64_t n, double lo, double hi) {
  std::vector<float> v(static_cast<size_t>(n));
  cpu::Rng(seed).FillUniform(v.data(), n, lo, hi);
  return v;
}

// Storage-type conversions on the host: float passes through, bf16 rounds to nearest even.
template <typename T>
HostStorageT<T> FromFloatOnHost(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return FloatToBf16Bits(v);
  }
}
template <typename T>
float ToFloatOnHost(HostStorageT<T> v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return Bf16BitsToFloat(v);
  }
}

template <typename T>
std::vector<HostStorageT<T>> ConvertTo(const std::vector<float>& values) {
  std::vector<HostStorageT<T>> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = FromFloatOnHost<T>(values[i]);
  return out;
}

template <typename T>
std::vector<float> ConvertToFloats(const std::vector<HostStorageT<T>>& values) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = ToFloatOnHost<T>(values[i]);
  return out;
}

// The values the CPU twin must see for a bf16 test: the inputs as the GPU reads them.
template <typename T>
std::vector<float> RoundedTo(const std::vector<float>& values) {
  return ConvertToFloats<T>(ConvertTo<T>(values));
}

// A device buffer of T filled from float values (rounded to T), and read back as floats.
template <typename T>
Status UploadFloats(DeviceBuffer<T>& buffer, const std::vector<float>& values) {
  return buffer.Upload(ConvertTo<T>(values));
}
template <typename T>
Status DownloadFloats(const DeviceBuffer<T>& buffer, std::vector<float>* values) {
  std::vector<HostStorageT<T>> raw;
  PIPECOORD_RETURN_IF_ERROR(buffer.Download(&raw));
  *values = ConvertToFloats<T>(raw);
  return Status::Ok();
}

// The comparison threshold for outputs stored as T (compare.h).
template <typename T>
constexpr double ToleranceFor();
template <>
constexpr double ToleranceFor<float>() {
  return kFloatTolerance;
}
template <>
constexpr double ToleranceFor<__nv_bfloat16>() {
  return kBf16Tolerance;
}

template <typename T>
const char* DTypeLabel();
template <>
inline const char* DTypeLabel<float>() {
  return "f32";
}
template <>
inline const char* DTypeLabel<__nv_bfloat16>() {
  return "bf16";
}

// The parameters of a TYPED_TEST_SUITE over both activation dtypes (gtest needs complete
// types, and __nv_bfloat16 is only declared for g++): a test takes `typename TypeParam::type`.
struct F32Case {
  using type = float;
};
struct Bf16Case {
  using type = __nv_bfloat16;
};
using ActivationTypes = ::testing::Types<F32Case, Bf16Case>;

// gtest's name generator for ActivationTypes: .../f32 and .../bf16.
struct DTypeNames {
  template <typename Case>
  static std::string GetName(int) {
    return DTypeLabel<typename Case::type>();
  }
};

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_GPU_TEST_H_
