#include "kernels/tensor.h"

#include <gtest/gtest.h>

namespace pipecoord::kernels {
namespace {

// Counts what it hands out, so a test sees the storage come back exactly once.
class CountingAllocator final : public Allocator {
 public:
  MemoryKind kind() const override { return MemoryKind::kHost; }
  Result<void*> Allocate(size_t bytes) override {
    if (bytes > limit) return Status(Code::kResourceExhausted, "over " + std::to_string(limit));
    live += bytes;
    return HostAllocator().Allocate(bytes);
  }
  void Deallocate(void* p, size_t bytes) override {
    live -= bytes;
    ++frees;
    HostAllocator().Deallocate(p, bytes);
  }
  size_t live = 0, frees = 0, limit = 1 << 20;
};

TEST(TensorTest, SpecCountsElementsAndBytes) {
  TensorSpec s{DType::kBF16, {2, 128, 256}};
  EXPECT_EQ(s.numel(), 65536);
  EXPECT_EQ(s.bytes(), 131072u);
  EXPECT_EQ(ToString(s), "bf16[2, 128, 256]");
  EXPECT_EQ((TensorSpec{DType::kF32, {}}).numel(), 1);  // a scalar
  EXPECT_EQ(DTypeBytes(DType::kI32), 4u);
}

TEST(TensorTest, DefaultIsEmpty) {
  Tensor t;
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.bytes(), 0u);
  EXPECT_TRUE(t.ToFloats().empty());
}

TEST(TensorTest, FromVectorTakesTheValuesWithoutACopy) {
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  const float* before = v.data();
  Tensor t = Tensor::FromVector(std::move(v), {2, 3});
  EXPECT_EQ(t.data(), before);
  EXPECT_EQ(t.dtype(), DType::kF32);
  EXPECT_TRUE(t.on_host());
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.ToFloats(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(t.host_span<int32_t>().empty()) << "a span of another dtype is refused";
}

TEST(TensorTest, StorageGoesBackOnceWhenTheLastHandleGoes) {
  CountingAllocator a;
  {
    auto t = Tensor::Empty(a, {DType::kF32, {4, 8}});
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(a.live, 128u);
    Tensor copy = *t;  // shares, never copies bytes
    EXPECT_EQ(copy.data(), t->data());
    auto r = copy.Reshaped({32});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->data(), t->data());
    EXPECT_EQ(a.live, 128u);
  }
  EXPECT_EQ(a.live, 0u);
  EXPECT_EQ(a.frees, 1u);
}

TEST(TensorTest, ErrorsNameTheRule) {
  CountingAllocator a;
  a.limit = 16;
  auto big = Tensor::Empty(a, {DType::kF32, {5}});
  EXPECT_EQ(big.status().code(), Code::kResourceExhausted);
  auto neg = Tensor::Empty(a, {DType::kF32, {2, -1}});
  EXPECT_EQ(neg.status().message(), "tensor shape[1]: must be >= 0, got -1");
  Tensor t = Tensor::FromVector(std::vector<float>{1, 2, 3});
  EXPECT_EQ(t.Reshaped({2, 2}).status().message(), "reshape f32[3] to f32[2, 2]: element counts differ");
}

TEST(TensorTest, TakeFloatsMovesOutOnlyWhenAlone) {
  std::vector<float> v = {1, 2, 3};
  const float* before = v.data();
  Tensor t = Tensor::FromVector(std::move(v));
  std::vector<float> out = t.TakeFloats();
  EXPECT_EQ(out.data(), before) << "no copy when the handle owns the vector alone";
  EXPECT_TRUE(t.empty());

  Tensor a = Tensor::FromVector(std::vector<float>{4, 5});
  Tensor b = a;  // shared: taking must copy, leaving b intact
  EXPECT_EQ(a.TakeFloats(), (std::vector<float>{4, 5}));
  EXPECT_EQ(b.ToFloats(), (std::vector<float>{4, 5}));
}

TEST(TensorTest, ViewedReinterpretsBytesOfTheSameCount) {
  auto raw = Tensor::Empty(HostAllocator(), {DType::kU8, {8}});
  ASSERT_TRUE(raw.ok());
  auto f = raw->Viewed({DType::kF32, {2}});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->data(), raw->data());
  EXPECT_EQ(f->host_span<float>().size(), 2u);
  EXPECT_EQ(raw->Viewed({DType::kBF16, {3}}).status().message(),
            "expected bf16[3] (6 bytes), got u8[8] (8 bytes)");
}

TEST(TensorTest, SliceSharesTheStorageAndKeepsItAlive) {
  CountingAllocator a;
  Tensor piece;
  {
    auto t = Tensor::Empty(a, {DType::kF32, {2, 5}});
    ASSERT_TRUE(t.ok());
    std::span<float> all = t->host_span<float>();
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<float>(i);
    auto s = t->Slice(3, 4);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->shape(), (std::vector<int64_t>{4}));
    EXPECT_EQ(s->ToFloats(), (std::vector<float>{3, 4, 5, 6}));
    s->host_span<float>()[0] = -1;  // writes show through the original
    EXPECT_EQ(all[3], -1);
    EXPECT_TRUE(t->Slice(10, 0).ok()) << "an empty slice at the end";
    piece = *s;
  }
  EXPECT_EQ(a.live, 40u) << "the view keeps the storage";
  EXPECT_EQ(piece.TakeFloats(), (std::vector<float>{-1, 4, 5, 6})) << "a view's elements are copied, not the vector";
  piece = Tensor();
  EXPECT_EQ(a.live, 0u);
  EXPECT_EQ(a.frees, 1u);
  Tensor t = Tensor::FromVector(std::vector<float>{1, 2, 3});
  EXPECT_EQ(t.Slice(2, 2).status().message(), "slice [2, 2 + 2) of f32[3]: must lie inside its 3 elements");
  EXPECT_EQ(t.Slice(-1, 1).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace pipecoord::kernels
