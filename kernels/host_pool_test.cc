// The counting host allocator against exact sizes and against glibc's own count of the heap
// (mallinfo2), across threads, hand-offs and a limit.
#include "kernels/host_pool.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <thread>

namespace pipecoord::kernels {
namespace {

TEST(HostPool, CountsWhatItHandsOutAndGetsBack) {
  CountingHostAllocator pool;
  {
    ScopedHostPool scope(&pool);
    HostBuffer<float> a(1000);
    HostBuffer<double> b(10, 1.5);
    EXPECT_EQ(pool.allocated_bytes(), 4000 + 80);
    EXPECT_EQ(pool.owned_bytes(), 4080);
    EXPECT_EQ(pool.num_allocations(), 2);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % 64, 0u);
    EXPECT_EQ(HostBlockPool(a.data()), &pool);
  }
  EXPECT_EQ(pool.allocated_bytes(), 0);
  EXPECT_EQ(pool.owned_bytes(), 0);
  EXPECT_EQ(pool.allocated_peak_bytes(), 4080);
  pool.ResetPeaks();
  EXPECT_EQ(pool.allocated_peak_bytes(), 0);
}

TEST(HostPool, NoPoolCountsNothingAndScopesNest) {
  CountingHostAllocator outer, inner;
  HostBuffer<float> plain(100);
  EXPECT_EQ(HostBlockPool(plain.data()), nullptr);
  ScopedHostPool a(&outer);
  {
    ScopedHostPool b(&inner);
    HostBuffer<float> v(10);
    EXPECT_EQ(inner.allocated_bytes(), 40);
  }
  EXPECT_EQ(CurrentHostPool(), &outer);
  HostBuffer<float> w(5);
  EXPECT_EQ(outer.allocated_bytes(), 20);
  EXPECT_EQ(inner.allocated_bytes(), 0);
}

TEST(HostPool, AFreeOnAnotherThreadIsCreditedToTheCountingPool) {
  CountingHostAllocator pool;
  HostBuffer<float> v;
  {
    ScopedHostPool scope(&pool);
    v.resize(256);
  }
  std::thread([buffer = std::move(v)]() mutable { buffer = {}; }).join();
  EXPECT_EQ(pool.allocated_bytes(), 0);
  // A copy made on a thread without a pool is nobody's.
  CountingHostAllocator other;
  HostBuffer<float> counted;
  {
    ScopedHostPool scope(&other);
    counted.resize(8);
  }
  HostBuffer<float> copy = counted;
  EXPECT_EQ(other.allocated_bytes(), 32);
  EXPECT_EQ(HostBlockPool(copy.data()), nullptr);
}

TEST(HostPool, AHandedOffBlockLeavesOwnedButStaysAllocatedUntilFreed) {
  CountingHostAllocator pool;
  ScopedHostPool scope(&pool);
  HostBuffer<float> v(100, 2.0f);
  const float* data = v.data();
  Tensor t = Tensor::FromHostBuffer(std::move(v), {10, 10});
  EXPECT_EQ(t.data(), data);  // no copy
  ASSERT_TRUE(t.HandOffToTransport().ok());
  EXPECT_EQ(pool.allocated_bytes(), 400);
  EXPECT_EQ(pool.owned_bytes(), 0);
  ASSERT_TRUE(t.HandOffToTransport().ok());  // idempotent
  EXPECT_EQ(pool.owned_bytes(), 0);
  t = Tensor();
  EXPECT_EQ(pool.allocated_bytes(), 0);
  EXPECT_EQ(pool.owned_bytes(), 0);
  EXPECT_EQ(pool.owned_peak_bytes(), 400);
  CountingHostAllocator other;
  HostBuffer<float> mine(4);
  EXPECT_EQ(other.HandOff(mine.data()).code(), Code::kInvalidArgument);
}

TEST(HostPool, TakeHostBufferMovesAnOwnedBufferAndCopiesAnythingElse) {
  CountingHostAllocator pool;
  ScopedHostPool scope(&pool);
  HostBuffer<float> v(64, 1.0f);
  const float* data = v.data();
  Tensor t = Tensor::FromHostBuffer(std::move(v), {64});
  HostBuffer<float> back = t.TakeHostBuffer();
  EXPECT_EQ(back.data(), data);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(pool.allocated_bytes(), 256);
  // A tensor from elsewhere (a transport's receive buffer) becomes the rank's own: a copy.
  Tensor received = Tensor::FromVector(std::vector<float>(32, 3.0f));
  HostBuffer<float> copied = received.TakeHostBuffer();
  EXPECT_EQ(copied.size(), 32u);
  EXPECT_EQ(copied[31], 3.0f);
  EXPECT_EQ(pool.allocated_bytes(), 256 + 128);
  // Shared storage is copied, not stolen.
  Tensor shared = Tensor::FromHostBuffer(std::move(back), {64});
  Tensor other = shared;
  HostBuffer<float> copy = shared.TakeHostBuffer();
  EXPECT_NE(copy.data(), other.data());
  EXPECT_EQ(other.numel(), 64);
}

TEST(HostPool, ALimitRefusesByNameAndCountsNothingRefused) {
  CountingHostAllocator pool;
  pool.set_limit_bytes(1000);
  ScopedHostPool scope(&pool);
  HostBuffer<float> ok(200);
  EXPECT_THROW(HostBuffer<float>(100), std::bad_alloc);
  auto refused = pool.Allocate(500);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("500 bytes"), std::string::npos) << refused.status().ToString();
  EXPECT_EQ(pool.allocated_bytes(), 800);
  auto fits = pool.Allocate(200);
  ASSERT_TRUE(fits.ok());
  pool.Deallocate(*fits, 200);
  EXPECT_EQ(pool.allocated_bytes(), 800);
}

// glibc's own account of the heap (in use in the arena plus mmapped chunks) moves by what the
// pool says it handed out, plus per-block overhead: the 64-byte header and malloc's rounding.
TEST(HostPool, GlibcSeesTheBytesThePoolCounts) {
  auto heap = [] {
    struct mallinfo2 m = mallinfo2();
    return static_cast<int64_t>(m.uordblks + m.hblkhd);
  };
  CountingHostAllocator pool;
  ScopedHostPool scope(&pool);
  for (size_t n : {size_t{1} << 10, size_t{100} << 10, size_t{8} << 20}) {
    const int64_t before = heap();
    HostBuffer<float> v(n);
    const int64_t grew = heap() - before;
    EXPECT_EQ(pool.allocated_bytes(), static_cast<int64_t>(n * 4));
    EXPECT_GE(grew, static_cast<int64_t>(n * 4)) << n;
    EXPECT_LE(grew, static_cast<int64_t>(n * 4) + 64 + 4096 + 64) << n;
  }
}

}  // namespace
}  // namespace pipecoord::kernels
