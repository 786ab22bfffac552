#include "kernels/tensor.h"

#include <cstdlib>
#include <new>

#include "kernels/host_pool.h"

namespace pipecoord::kernels {
namespace {

class HeapAllocator final : public Allocator {
 public:
  MemoryKind kind() const override { return MemoryKind::kHost; }
  Result<void*> Allocate(size_t bytes) override {
    if (bytes == 0) bytes = 1;
    void* p = ::operator new(bytes, std::align_val_t{64}, std::nothrow);
    if (p == nullptr) {
      return Status(Code::kResourceExhausted, "host memory: cannot allocate " + std::to_string(bytes) + " bytes");
    }
    return p;
  }
  void Deallocate(void* ptr, size_t) override { ::operator delete(ptr, std::align_val_t{64}); }
};

}  // namespace

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kU8: return "u8";
  }
  return "?";
}

size_t DTypeBytes(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return 2;
    case DType::kU8: return 1;
    default: return 4;
  }
}

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return shape.empty() ? 1 : n;
}

std::string ToString(const TensorSpec& spec) {
  std::string s = std::string(DTypeName(spec.dtype)) + "[";
  for (size_t i = 0; i < spec.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(spec.shape[i]);
  return s + "]";
}

Allocator& HostAllocator() {
  static HeapAllocator* heap = new HeapAllocator();  // never destroyed: tensors may outlive main's locals
  return *heap;
}

Result<Tensor> Tensor::Empty(Allocator& allocator, const TensorSpec& spec) {
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    if (spec.shape[i] < 0) {
      return InvalidArgument("tensor shape[" + std::to_string(i) + "]: must be >= 0, got " + std::to_string(spec.shape[i]));
    }
  }
  const size_t bytes = spec.bytes();
  auto p = allocator.Allocate(bytes);
  if (!p.ok()) return p.status();
  Tensor t;
  Allocator* a = &allocator;
  t.storage_ = std::shared_ptr<void>(*p, [a, bytes](void* q) { a->Deallocate(q, bytes); });
  t.data_ = *p;
  t.allocator_ = a;
  t.spec_ = spec;
  t.memory_ = allocator.kind();
  t.device_ = allocator.device();
  return t;
}

Tensor Tensor::FromVector(std::vector<float> values) {
  const auto n = static_cast<int64_t>(values.size());
  return FromVector(std::move(values), {n});
}

Tensor Tensor::FromVector(std::vector<float> values, std::vector<int64_t> shape) {
  auto owned = std::make_shared<std::vector<float>>(std::move(values));
  Tensor t;
  t.data_ = owned->data();
  t.owned_floats_ = owned.get();
  t.storage_ = std::move(owned);
  t.spec_ = {DType::kF32, std::move(shape)};
  return t;
}

Tensor Tensor::FromVector(std::vector<int32_t> values) {
  auto owned = std::make_shared<std::vector<int32_t>>(std::move(values));
  Tensor t;
  t.data_ = owned->data();
  t.spec_ = {DType::kI32, {static_cast<int64_t>(owned->size())}};
  t.storage_ = std::move(owned);
  return t;
}

Tensor Tensor::FromHostBuffer(HostBuffer<float> values, std::vector<int64_t> shape) {
  auto owned = std::make_shared<HostBuffer<float>>(std::move(values));
  Tensor t;
  t.data_ = owned->data();
  t.owned_buffer_ = owned.get();
  t.allocator_ = HostBlockPool(t.data_);
  t.storage_ = std::move(owned);
  t.spec_ = {DType::kF32, std::move(shape)};
  return t;
}

HostBuffer<float> Tensor::TakeHostBuffer() {
  HostBuffer<float> out;
  if (owned_buffer_ != nullptr && storage_.use_count() == 1 &&
      owned_buffer_->size() == static_cast<size_t>(numel()) && dtype() == DType::kF32) {
    out = std::move(*owned_buffer_);
  } else if (auto v = host_span<const float>(); !v.empty()) {
    out.assign(v.begin(), v.end());
  }
  *this = Tensor();
  return out;
}

Result<Tensor> Tensor::Reshaped(std::vector<int64_t> shape) const {
  TensorSpec to{spec_.dtype, std::move(shape)};
  if (to.numel() != spec_.numel()) {
    return InvalidArgument("reshape " + ToString(spec_) + " to " + ToString(to) + ": element counts differ");
  }
  Tensor t = *this;
  t.spec_ = std::move(to);
  return t;
}

Result<Tensor> Tensor::Slice(int64_t begin, int64_t count) const {
  if (begin < 0 || count < 0 || begin > numel() - count) {
    return InvalidArgument("slice [" + std::to_string(begin) + ", " + std::to_string(begin) + " + " +
                           std::to_string(count) + ") of " + ToString(spec_) + ": must lie inside its " +
                           std::to_string(numel()) + " elements");
  }
  Tensor t = *this;
  t.spec_ = TensorSpec{spec_.dtype, {count}};
  t.data_ = data_ == nullptr ? nullptr : static_cast<char*>(data_) + static_cast<size_t>(begin) * DTypeBytes(spec_.dtype);
  t.owned_floats_ = nullptr;  // TakeFloats / TakeHostBuffer copy a view's elements
  t.owned_buffer_ = nullptr;
  t.allocator_ = nullptr;     // not the start of an allocation: never handed off
  return t;
}

Result<Tensor> Tensor::Viewed(const TensorSpec& spec) const {
  if (spec.bytes() != bytes()) {
    return InvalidArgument("expected " + ToString(spec) + " (" + std::to_string(spec.bytes()) + " bytes), got " +
                           ToString(spec_) + " (" + std::to_string(bytes()) + " bytes)");
  }
  Tensor t = *this;
  t.spec_ = spec;
  t.owned_floats_ = spec.dtype == DType::kF32 ? owned_floats_ : nullptr;
  t.owned_buffer_ = spec.dtype == DType::kF32 ? owned_buffer_ : nullptr;
  return t;
}

Status Tensor::HandOffToTransport() const {
  if (allocator_ == nullptr || data_ == nullptr || storage_.use_count() != 1) return Status::Ok();
  return allocator_->HandOff(data_);
}

std::vector<float> Tensor::TakeFloats() {
  std::vector<float> out;
  if (owned_floats_ != nullptr && storage_.use_count() == 1 &&
      owned_floats_->size() == static_cast<size_t>(numel()) && dtype() == DType::kF32) {
    out = std::move(*owned_floats_);
  } else {
    out = ToFloats();
  }
  *this = Tensor();
  return out;
}

std::vector<float> Tensor::ToFloats() const {
  auto s = host_span<float>();
  return std::vector<float>(s.begin(), s.end());
}

}  // namespace pipecoord::kernels
