// Host memory a rank can account for: what the CPU backend's activations, gradients, weights and
// optimizer states take, counted as the allocator hands it out and gives it back, so the memory
// check compares its budget with a measurement, as the CUDA backend's caching pool does on the
// device (kernels/caching_allocator.h), not with the sum of the buffers the model means to keep.
//
// - CountingHostAllocator: one rank's count. Bytes are exact (what was asked, no rounding: glibc's
//   malloc already caches, so a pool on top would only round); allocated, and "owned" (allocated
//   minus the blocks handed off to a transport that sends them later, as CachingAllocator's).
// - HostBuffer<T>: a std::vector whose storage comes from the counting allocator current on the
//   allocating thread (ScopedHostPool), the host's equivalent of CUDA's current device: the
//   backend sets it around every action, so the model's code allocates as it always did and
//   every buffer it makes is counted. Each block remembers which allocator counted it, so a free
//   on any thread (a transport's sender) is credited there. With no current allocator the block is
//   the plain heap's and counted nowhere.
//
// Thread-safe: counters are atomics; a block may be allocated on one thread and freed on another.
// An allocator must outlive every block it counted.
#ifndef PIPECOORD_KERNELS_HOST_POOL_H_
#define PIPECOORD_KERNELS_HOST_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "kernels/tensor.h"

namespace pipecoord::kernels {

class CountingHostAllocator final : public Allocator {
 public:
  CountingHostAllocator() = default;
  CountingHostAllocator(const CountingHostAllocator&) = delete;
  CountingHostAllocator& operator=(const CountingHostAllocator&) = delete;

  MemoryKind kind() const override { return MemoryKind::kHost; }
  // RESOURCE_EXHAUSTED naming the size when the heap refuses (or the limit below is passed).
  Result<void*> Allocate(size_t bytes) override;
  void Deallocate(void* ptr, size_t bytes) override;
  // The block stops counting as owned (a transport holds it until sent); INVALID_ARGUMENT for a
  // block this allocator did not count. Idempotent.
  Status HandOff(void* ptr) override;

  int64_t allocated_bytes() const { return allocated_.load(); }
  int64_t allocated_peak_bytes() const { return allocated_peak_.load(); }
  int64_t owned_bytes() const { return owned_.load(); }
  int64_t owned_peak_bytes() const { return owned_peak_.load(); }
  int64_t num_allocations() const { return allocations_.load(); }
  // Both peaks restart from the current values.
  void ResetPeaks();

  // A ceiling on allocated bytes (0: none), the host's stand-in for a device's capacity: an
  // allocation past it is RESOURCE_EXHAUSTED (Allocate) or std::bad_alloc (HostBuffer).
  void set_limit_bytes(int64_t limit) { limit_.store(limit); }

  // Internal to HostBuffer: count `bytes` on this allocator / give them back.
  bool Count(size_t bytes);
  void Uncount(size_t bytes, bool handed_off);

 private:
  std::atomic<int64_t> allocated_{0}, allocated_peak_{0}, owned_{0}, owned_peak_{0}, allocations_{0}, limit_{0};
};

// The allocator HostBuffers made on this thread are counted on (null: none).
CountingHostAllocator* CurrentHostPool();

// Makes `pool` current on this thread for its lifetime (restores the previous one after).
class ScopedHostPool {
 public:
  explicit ScopedHostPool(CountingHostAllocator* pool);
  ~ScopedHostPool();
  ScopedHostPool(const ScopedHostPool&) = delete;
  ScopedHostPool& operator=(const ScopedHostPool&) = delete;

 private:
  CountingHostAllocator* previous_;
};

// A 64-byte aligned block counted on `pool` (null: uncounted); nullptr when the heap or the
// pool's limit refuses. Freed with FreeHostBlock (nullptr is a no-op).
void* AllocateHostBlock(CountingHostAllocator* pool, size_t bytes);
void FreeHostBlock(void* ptr);
// The allocator that counted the block at `ptr` (null: none, or ptr is null).
CountingHostAllocator* HostBlockPool(const void* ptr);

// The std::allocator HostBuffer uses: stateless (every instance equal, so buffers move and swap
// freely); each block is counted on the allocating thread's CurrentHostPool().
template <typename T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() noexcept = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    void* p = AllocateHostBlock(CurrentHostPool(), n * sizeof(T));
    if (p == nullptr && n != 0) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) noexcept { FreeHostBlock(p); }
  template <typename U>
  bool operator==(const PoolAllocator<U>&) const noexcept { return true; }
};

template <typename T>
using HostBuffer = std::vector<T, PoolAllocator<T>>;

// A copy of `values` counted on this thread's CurrentHostPool() (data from outside the rank's
// pool: training data, a test's inputs).
template <typename T, typename A>
HostBuffer<T> ToHostBuffer(const std::vector<T, A>& values) {
  return HostBuffer<T>(values.begin(), values.end());
}

}  // namespace pipecoord::kernels

#endif  // PIPECOORD_KERNELS_HOST_POOL_H_
