// Tensor: one small handle for the data that moves between kernels and transports: where the
// bytes live (host or a CUDA device), their dtype and shape, and who frees them.
//
// A Tensor shares ownership of its storage (copying a Tensor copies the handle, never the
// bytes), so a transport can keep a tensor alive until its send completes while the executor
// drops its own reference. The storage goes back to the allocator that gave it when the last
// handle goes; the allocator must outlive every tensor it gave.
//
// The CPU backend and the TCP transport use host tensors; the CUDA backend and NCCL transport
// use device tensors and never copy them to the host unless asked (CopyToHost).
#ifndef PIPECOORD_KERNELS_TENSOR_H_
#define PIPECOORD_KERNELS_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "common/status.h"

namespace pipecoord::kernels {

// kernels/host_pool.h: a std::vector whose storage a rank's counting allocator hands out.
template <typename T>
struct PoolAllocator;
template <typename T>
using HostBuffer = std::vector<T, PoolAllocator<T>>;

enum class DType : uint8_t { kF32 = 0, kBF16 = 1, kI32 = 2, kU8 = 3 };

// "f32", "bf16", "i32", "u8" (raw bytes, e.g. a payload before its receiver names its spec).
const char* DTypeName(DType dtype);
// 4, 2, 4, 1.
size_t DTypeBytes(DType dtype);

enum class MemoryKind : uint8_t { kHost = 0, kCuda = 1 };

// What a tensor is, without its bytes: what a receiver expects.
struct TensorSpec {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;

  int64_t numel() const;
  size_t bytes() const { return static_cast<size_t>(numel()) * DTypeBytes(dtype); }
  friend bool operator==(const TensorSpec&, const TensorSpec&) = default;
};

// "bf16[2, 128, 256]".
std::string ToString(const TensorSpec& spec);

// Where a tensor's bytes come from. Thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual MemoryKind kind() const = 0;
  // The CUDA device index; -1 for host memory.
  virtual int device() const { return -1; }
  // RESOURCE_EXHAUSTED naming the size when the memory is not there.
  virtual Result<void*> Allocate(size_t bytes) = 0;
  virtual void Deallocate(void* ptr, size_t bytes) = 0;
  // The block at `ptr` (from Allocate) is now held only by a transport sending it, which lets it
  // go later than Send's return. A pool that reports its peak against a plan's budget stops
  // counting it as the program's own (CachingAllocator's owned bytes); others ignore it.
  virtual Status HandOff(void* /*ptr*/) { return Status::Ok(); }
};

// The process's host heap (64-byte aligned).
Allocator& HostAllocator();

class Tensor {
 public:
  Tensor() = default;  // empty: no bytes, shape {0}

  // Uninitialised storage of `spec` from `allocator`.
  static Result<Tensor> Empty(Allocator& allocator, const TensorSpec& spec);
  // A host f32 tensor that takes over `values` (no copy); shape {values.size()} by default.
  static Tensor FromVector(std::vector<float> values);
  static Tensor FromVector(std::vector<float> values, std::vector<int64_t> shape);
  static Tensor FromVector(std::vector<int32_t> values);
  // The same for a counted host buffer (kernels/host_pool.h): its allocator stays the one that
  // counted it, so HandOffToTransport reaches it.
  static Tensor FromHostBuffer(HostBuffer<float> values, std::vector<int64_t> shape);

  bool empty() const { return numel() == 0; }
  const TensorSpec& spec() const { return spec_; }
  DType dtype() const { return spec_.dtype; }
  const std::vector<int64_t>& shape() const { return spec_.shape; }
  int64_t numel() const { return spec_.numel(); }
  size_t bytes() const { return spec_.bytes(); }
  MemoryKind memory() const { return memory_; }
  bool on_host() const { return memory_ == MemoryKind::kHost; }
  int device() const { return device_; }

  void* data() { return data_; }
  const void* data() const { return data_; }

  // A view of a host tensor's elements; an empty span when the tensor is on a device or holds
  // another dtype (T: float for f32, int32_t for i32, uint16_t for bf16 bits).
  template <typename T>
  std::span<T> host_span();
  template <typename T>
  std::span<const T> host_span() const;

  // The same storage with another shape of the same element count; INVALID_ARGUMENT otherwise.
  Result<Tensor> Reshaped(std::vector<int64_t> shape) const;

  // Elements [begin, begin + count) as a 1-D tensor sharing this one's storage (which the view
  // keeps alive): a ZeRO shard of a flat buffer, one tensor's piece of it. Writes through either
  // show in both. A view never hands its storage to a transport (HandOffToTransport does nothing).
  // INVALID_ARGUMENT unless 0 <= begin, 0 <= count and begin + count <= numel().
  Result<Tensor> Slice(int64_t begin, int64_t count) const;

  // The same bytes seen as `spec` (a received u8 payload as the tensor its receiver expects);
  // INVALID_ARGUMENT naming both sizes when the byte counts differ.
  Result<Tensor> Viewed(const TensorSpec& spec) const;

  // Called by a transport that keeps this tensor after Send returns (until a copy or the peer is
  // done with it): when this handle is the storage's only one, tells the allocator that gave it
  // (Allocator::HandOff), so the sender's memory peak does not count bytes a transport that lets
  // go at Send would have freed. With other handles alive (the sender still uses the bytes) or
  // storage not from an allocator, nothing happens. The allocator's error otherwise.
  Status HandOffToTransport() const;

  // A host f32 tensor's values as a vector (a copy); empty for any other tensor.
  std::vector<float> ToFloats() const;
  // The same, but moves the values out without a copy when this handle alone owns a vector
  // given to FromVector; the tensor is empty afterwards.
  std::vector<float> TakeFloats();
  // The values as a counted host buffer: moved out without a copy when this handle alone owns one
  // given to FromHostBuffer, else copied into a buffer counted on the calling thread's
  // CurrentHostPool() (a received tensor becomes the rank's own). Empty tensor afterwards.
  HostBuffer<float> TakeHostBuffer();

 private:
  std::shared_ptr<void> storage_;  // frees through the allocator (or owns a vector)
  std::vector<float>* owned_floats_ = nullptr;  // the vector storage_ owns, if FromVector(float)
  HostBuffer<float>* owned_buffer_ = nullptr;   // the buffer storage_ owns, if FromHostBuffer
  void* data_ = nullptr;
  Allocator* allocator_ = nullptr;  // the one that gave storage_ (Empty), else null
  TensorSpec spec_{DType::kF32, {0}};
  MemoryKind memory_ = MemoryKind::kHost;
  int device_ = -1;
};

template <typename T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<float>() { return DType::kF32; }
template <>
constexpr DType DTypeOf<int32_t>() { return DType::kI32; }
template <>
constexpr DType DTypeOf<uint16_t>() { return DType::kBF16; }
template <>
constexpr DType DTypeOf<uint8_t>() { return DType::kU8; }

template <typename T>
std::span<T> Tensor::host_span() {
  if (!on_host() || dtype() != DTypeOf<std::remove_const_t<T>>() || data_ == nullptr) return {};
  return {static_cast<T*>(data_), static_cast<size_t>(numel())};
}

template <typename T>
std::span<const T> Tensor::host_span() const {
  if (!on_host() || dtype() != DTypeOf<std::remove_const_t<T>>() || data_ == nullptr) return {};
  return {static_cast<const T*>(data_), static_cast<size_t>(numel())};
}

}  // namespace pipecoord::kernels

#endif  // PIPECOORD_KERNELS_TENSOR_H_
