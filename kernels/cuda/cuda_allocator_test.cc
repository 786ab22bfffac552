// The caching allocator on a real GPU: cudaMalloc'd segments are reused, filled and read back,
// stats are exact, a block used on a second stream is not reused while that stream is held back,
// and an impossible request is an OOM the pool survives. Skips only where there is no GPU
// (kernels::QueryDevices' rule); every other CUDA error fails.
#include "kernels/cuda/cuda_allocator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "kernels/device.h"
#include "kernels/tensor.h"

namespace pipecoord::kernels::cuda {
namespace {

constexpr size_t kMiB = 1024 * 1024;

#define ASSERT_CUDA(call)                                                            \
  do {                                                                               \
    const cudaError_t err_ = (call);                                                 \
    ASSERT_EQ(err_, cudaSuccess) << #call << ": " << cudaGetErrorName(err_) << " ("  \
                                 << cudaGetErrorString(err_) << ")";                 \
  } while (0)

// Skips the test where there is no GPU; fails on any other reason not to run.
#define SKIP_WITHOUT_GPU()                                                                 \
  do {                                                                                     \
    auto devices = QueryDevices();                                                         \
    if (!devices.ok()) {                                                                   \
      ASSERT_EQ(devices.status().code(), Code::kUnavailable) << devices.status().ToString(); \
      ASSERT_EQ(devices.status().message().rfind("no CUDA device: ", 0), 0u);               \
      GTEST_SKIP() << devices.status().message();                                          \
    }                                                                                      \
  } while (0)

// `n` bytes of `ptr` copied back on `stream`, into a host buffer poisoned with `poison` first so
// an unwritten byte shows.
std::vector<uint8_t> ReadBack(const void* ptr, size_t n, cudaStream_t stream, uint8_t poison) {
  std::vector<uint8_t> host(n, poison);
  EXPECT_EQ(cudaMemcpyAsync(host.data(), ptr, n, cudaMemcpyDeviceToHost, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  return host;
}

size_t CountNot(const std::vector<uint8_t>& bytes, uint8_t value) {
  size_t n = 0;
  for (uint8_t b : bytes) n += b != value;
  return n;
}

// Holds a stream back: work queued after Hold() waits until Release() (or the destructor, so a
// failing test never leaves a stream stuck). The host function makes no CUDA call.
class StreamGate {
 public:
  ~StreamGate() { Release(); }
  cudaError_t Hold(cudaStream_t stream) { return cudaLaunchHostFunc(stream, &StreamGate::Wait, this); }
  void Release() { open_.store(true); }

 private:
  static void CUDART_CB Wait(void* self) {
    auto* gate = static_cast<StreamGate*>(self);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!gate->open_.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  std::atomic<bool> open_{false};
};

class CudaAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    ASSERT_CUDA(cudaSetDevice(0));
    ASSERT_CUDA(cudaStreamCreateWithFlags(&s1_, cudaStreamNonBlocking));
    ASSERT_CUDA(cudaStreamCreateWithFlags(&s2_, cudaStreamNonBlocking));
    auto allocator = NewCudaCachingAllocator(0, s1_);
    ASSERT_TRUE(allocator.ok()) << allocator.status().ToString();
    allocator_ = std::move(*allocator);
  }
  void TearDown() override {
    if (IsSkipped()) return;
    if (allocator_ != nullptr) {
      EXPECT_TRUE(allocator_->EmptyCache().ok());
      allocator_.reset();
    }
    for (cudaStream_t stream : {s1_, s2_}) {
      if (stream != nullptr) {
        EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
      }
    }
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "no CUDA error left behind";
  }

  void* Alloc(size_t bytes, cudaStream_t stream) {
    auto p = allocator_->Allocate(bytes, ToStreamId(stream));
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? *p : nullptr;
  }

  cudaStream_t s1_ = nullptr;
  cudaStream_t s2_ = nullptr;
  std::unique_ptr<CachingAllocator> allocator_;
};

TEST(CudaAllocatorFactoryTest, AnswersLikeQueryDevices) {
  auto devices = QueryDevices();
  auto allocator = NewCudaCachingAllocator(0, nullptr);
  if (!devices.ok()) {
    ASSERT_FALSE(allocator.ok());
    EXPECT_EQ(allocator.status().code(), devices.status().code());
    EXPECT_EQ(allocator.status().message(), devices.status().message());
    SKIP_WITHOUT_GPU();
  }
  ASSERT_TRUE(allocator.ok()) << allocator.status().ToString();
  EXPECT_EQ((*allocator)->kind(), MemoryKind::kCuda);
  EXPECT_EQ((*allocator)->device(), 0);
  auto absent = NewCudaCachingAllocator(static_cast<int>(devices->size()), nullptr);
  EXPECT_EQ(absent.status().code(), Code::kInvalidArgument) << absent.status().ToString();
}

TEST_F(CudaAllocatorTest, AllocatesFillsReusesAndCounts) {
  void* a = Alloc(1000, s1_);
  ASSERT_NE(a, nullptr);
  CachingAllocatorStats s = allocator_->stats();
  EXPECT_EQ(s.allocated_bytes_current, 1024);
  EXPECT_EQ(s.reserved_bytes_current, int64_t{2 * kMiB});
  EXPECT_EQ(s.active_bytes_current, 1024);

  ASSERT_CUDA(cudaMemsetAsync(a, 0xAB, 1000, s1_));
  EXPECT_EQ(CountNot(ReadBack(a, 1000, s1_, 0x00), 0xAB), 0u);

  ASSERT_TRUE(allocator_->Free(a).ok());
  EXPECT_EQ(allocator_->stats().allocated_bytes_current, 0);
  EXPECT_EQ(Alloc(1000, s1_), a) << "the same stream reuses the block at once";

  // A large block in its own segment, filled end to end.
  const size_t big = 64 * kMiB + 1;
  void* b = Alloc(big, s1_);
  ASSERT_NE(b, nullptr);
  s = allocator_->stats();
  EXPECT_EQ(s.allocated_bytes_current, int64_t{1024 + 64 * kMiB + 512}) << "64 MiB + 512 split from a 66 MiB segment";
  EXPECT_EQ(s.reserved_bytes_current, int64_t{2 * kMiB + 66 * kMiB});
  ASSERT_CUDA(cudaMemsetAsync(b, 0x3C, big, s1_));
  EXPECT_EQ(CountNot(ReadBack(b, big, s1_, 0x00), 0x3C), 0u);

  ASSERT_TRUE(allocator_->Free(a).ok());
  ASSERT_TRUE(allocator_->Free(b).ok());
  s = allocator_->stats();
  EXPECT_EQ(s.allocated_bytes_current, 0);
  EXPECT_EQ(s.allocated_bytes_peak, int64_t{1024 + 64 * kMiB + 512});
  EXPECT_EQ(s.reserved_bytes_current, int64_t{68 * kMiB});
  ASSERT_TRUE(allocator_->EmptyCache().ok());
  EXPECT_EQ(allocator_->stats().reserved_bytes_current, 0);
}

TEST_F(CudaAllocatorTest, EventsTellWhenAHeldStreamFinishes) {
  CudaStreamEvents events(0);
  StreamGate gate;
  ASSERT_CUDA(gate.Hold(s2_));
  auto e = events.Record(ToStreamId(s2_));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  auto done = events.IsComplete(*e);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_FALSE(*done) << "the stream is held back";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "not ready is not left as an error";
  gate.Release();
  ASSERT_TRUE(events.Wait(*e).ok());
  done = events.IsComplete(*e);
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(*done);
  events.Release(*e);
  auto again = events.Record(ToStreamId(s2_));  // the released event is recorded again
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *e);
  ASSERT_TRUE(events.Wait(*again).ok());
  events.Release(*again);
}

TEST_F(CudaAllocatorTest, BlockUsedOnAnotherStreamWaitsForIt) {
  const size_t n = 256 * 1024;
  void* a = Alloc(n, s1_);
  ASSERT_NE(a, nullptr);
  ASSERT_CUDA(cudaMemsetAsync(a, 0x11, n, s1_));
  ASSERT_CUDA(cudaStreamSynchronize(s1_));

  // Stream 2 writes into a, but only once the gate opens.
  StreamGate gate;
  ASSERT_CUDA(gate.Hold(s2_));
  ASSERT_CUDA(cudaMemsetAsync(a, 0x5A, n, s2_));
  ASSERT_TRUE(allocator_->RecordStream(a, ToStreamId(s2_)).ok());
  ASSERT_TRUE(allocator_->Free(a).ok());
  EXPECT_EQ(allocator_->stats().active_bytes_current, int64_t{n}) << "active until stream 2 is done";

  void* b = Alloc(n, s1_);
  EXPECT_NE(b, a) << "stream 2 has not run yet: a must not be handed out";
  ASSERT_TRUE(allocator_->Free(b).ok());

  gate.Release();
  ASSERT_CUDA(cudaStreamSynchronize(s2_));
  void* c = Alloc(n, s1_);
  EXPECT_EQ(c, a) << "reused once stream 2's event completed";
  EXPECT_EQ(CountNot(ReadBack(c, n, s1_, 0x00), 0x5A), 0u) << "stream 2's write landed before the reuse";
  ASSERT_TRUE(allocator_->Free(c).ok());
  EXPECT_EQ(allocator_->stats().active_bytes_current, 0);
}

TEST_F(CudaAllocatorTest, ImpossibleRequestIsAnOomThePoolSurvives) {
  void* a = Alloc(4096, s1_);
  ASSERT_NE(a, nullptr);
  const size_t too_much = size_t{1} << 40;  // 1 TiB: more than any GPU holds
  auto p = allocator_->Allocate(too_much, ToStreamId(s1_));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kResourceExhausted) << p.status().ToString();
  const std::string& m = p.status().message();
  EXPECT_NE(m.find("allocating 1099511627776 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("4096 bytes allocated"), std::string::npos) << m;
  EXPECT_NE(m.find("2097152 bytes reserved"), std::string::npos) << m;
  EXPECT_NE(m.find("cudaErrorMemoryAllocation"), std::string::npos) << m;
  CachingAllocatorStats s = allocator_->stats();
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the OOM is not left for the next call";

  void* b = Alloc(kMiB, s1_);
  ASSERT_NE(b, nullptr);
  ASSERT_CUDA(cudaMemsetAsync(b, 0x77, kMiB, s1_));
  EXPECT_EQ(CountNot(ReadBack(b, kMiB, s1_, 0x00), 0x77), 0u);
  ASSERT_TRUE(allocator_->Free(a).ok());
  ASSERT_TRUE(allocator_->Free(b).ok());
}

TEST_F(CudaAllocatorTest, TensorsComeFromThePoolOnTheDefaultStream) {
  {
    auto t = Tensor::Empty(*allocator_, TensorSpec{DType::kBF16, {512, 1024}});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->memory(), MemoryKind::kCuda);
    EXPECT_EQ(t->device(), 0);
    cudaPointerAttributes attributes{};
    ASSERT_CUDA(cudaPointerGetAttributes(&attributes, t->data()));
    EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
    EXPECT_EQ(attributes.device, 0);
    ASSERT_CUDA(cudaMemsetAsync(t->data(), 0x42, t->bytes(), s1_));
    EXPECT_EQ(CountNot(ReadBack(t->data(), t->bytes(), s1_, 0x00), 0x42), 0u);
    EXPECT_EQ(allocator_->stats().allocated_bytes_current, int64_t{kMiB});
  }
  EXPECT_EQ(allocator_->stats().allocated_bytes_current, 0);
  EXPECT_EQ(allocator_->stats().reserved_bytes_current, int64_t{2 * kMiB});
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
